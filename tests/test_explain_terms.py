"""Backward term decompositions (refnorm/check/explain_terms.py, issue 33): for every op with a backward, a
planted deviation of one gradient's arithmetic is named with the piece that changed; the correct kernel
and a deviation that is no term's names nothing; and every decomposition sums to the reference gradient."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (ROOT, os.path.join(ROOT, "tests")):
    if p not in sys.path:
        sys.path.insert(0, p)

from refnorm import registry  # noqa: E402
from refnorm.check import explain_terms  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.check.explain import fit_ratio  # noqa: E402
from refnorm.golden import load_case, store  # noqa: E402
from test_explain_families import GOLDEN, Spec, diag, expect  # noqa: E402


def f64(d):
    return {k: np.asarray(v, np.float64) for k, v in d.items() if v is not None}


def grads(**new):
    """A ``post`` replacing the named gradients by ``fn(call, d)``."""
    def post(call, d):
        return {**d, "grads": {**d["grads"], **{k: fn(call, d) for k, fn in new.items()}}}
    return post


def sig(z):
    return 1 / (1 + np.exp(-z))


def centred(g, x, eps, centre=True, gm=None, gp=None, k=None):
    """rstd (g - mean(gm) - x_hat mean(gp x_hat)) over the last axis (gm, gp default g); rows summed over
    blocks of k rows (divided by n) where k is given."""
    gm = g if gm is None else gm
    gp = g if gp is None else gp
    mean = x.mean(-1, keepdims=True) if centre else 0.0
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xh = (x - mean) * rstd

    def m(a):
        if k is None:
            return a.mean(-1, keepdims=True)
        s = np.add.reduceat(a.sum(-1), np.arange(0, a.shape[0], k))
        return np.repeat(s, k)[:a.shape[0], None] / a.shape[1]
    return rstd * (g - (m(gm) if centre else 0.0) - xh * m(gp * xh))


# ---------------------------------------------------------------- one planted deviation per op
def test_gated_norm_dz_with_sigmoid_for_silu_grad_is_a_missing_term():
    """dz = dv x sigmoid(z): silu'(z)'s z sigmoid(z) (1 - sigmoid(z)) term left out; the gate input's gradient
    alone is the gate's (docs/verdicts.md, "Which mechanism a bug is", rule 3)."""
    def dz(call, d):
        z = np.asarray(call.inputs["z"], np.float64)
        s = sig(z)
        return d["grads"]["z"] * s / (s * (1 + z * (1 - s)))
    expect(Spec(post=grads(z=dz)), "gated_norm/normal_f32_4x64", "gate",
           "dz matches the formula dv x silu'(z)")
    expect(Spec(post=grads(z=dz)), "gated_norm/normal_f32_4x64", "gate",
           "the dv x z sigmoid(z) (1 - sigmoid(z)) term missing")


def test_gated_norm_dx_without_the_gate_factor_is_gate():
    """norm_before_gate=False: dx = dv, silu(z) of d(x silu(z))/dx left out."""
    def dx(call, d):
        z = np.asarray(call.inputs["z"], np.float64)
        return d["grads"]["x"] / (z * sig(z))
    expect(Spec(post=grads(x=dx)), "gated_norm/normal_f32_4x64", "gate", "the gate's factor silu(z)")


def test_dyt_dalpha_without_x_is_backward():
    def da(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        a = float(np.reshape(call.inputs["alpha"], ()))
        w = np.asarray(call.inputs["weight"], np.float64)
        return np.reshape(np.sum(dy * w / np.cosh(a * x) ** 2), np.shape(call.inputs["alpha"]))
    expect(Spec(post=grads(alpha=da)), "dyt/normal_f32_3x20x12", "backward", "x of d(alpha x)/d alpha left out")


def _poly_du(x, dy, w, eps):
    out = []
    for k, p in enumerate((3, 2, 1)):
        u = x ** p
        r = 1 / np.sqrt((u * u).mean(-1, keepdims=True) + eps)
        h, g = u * r, dy * w[k]
        out.append((p, u, r * (g - h * (g * h).mean(-1, keepdims=True))))
    return out


def test_poly_norm_dx_without_the_power_factors_is_backward():
    """dx = x^2 du_3 + x du_2 + du_1: the factors 3 and 2 of d(x^p)/dx left out."""
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        return sum(x ** (p - 1) * du for p, _, du in _poly_du(x, dy, np.asarray(call.inputs["weight"], np.float64),
                                                            call.config["eps"]))
    expect(Spec(post=grads(x=dx)), "poly_norm/normal_f32_4x64", "backward",
           "dx matches the formula with the factors p of d(x^p)/dx left out")


def test_poly_norm_dx_with_one_projection_term_doubled_is_a_fitted_coefficient():
    """The cubic's projection term counted twice: coefficients 3, -6, 2, -2, 1, -1 fitted."""
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        w, eps = np.asarray(call.inputs["weight"], np.float64), call.config["eps"]
        u = x ** 3
        r = 1 / np.sqrt((u * u).mean(-1, keepdims=True) + eps)
        h, g = u * r, dy * w[0]
        return d["grads"]["x"] - 3 * x ** 2 * r * h * (g * h).mean(-1, keepdims=True)
    expect(Spec(post=grads(x=dx)), "poly_norm/normal_f32_4x64", "backward",
           "the x^2 r_3 h_3 mean(g_3 h_3) term counted twice: fitted coefficients 3.00, -6.00")


def test_poly_norm_dweight_from_the_unnormalized_power_is_backward():
    def dw(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        return np.array([np.sum(dy * x ** p) for p in (3, 2, 1)])
    expect(Spec(post=grads(weight=dw)), "poly_norm/normal_f32_4x64", "backward",
           "dweight matches the formula with x^p (the power before its normalization)")


def test_group_norm_silu_grad_with_a_sign_flipped_inside_is_backward():
    """silu'(p) as s (1 - p (1 - s)): every gradient follows; dx's coefficients (1, -1)."""
    def post(call, d):
        cfg, ins = call.config, dict(call.inputs)
        p = registry.evaluate("group_norm", ins, config=cfg).outputs["y"]
        s = sig(p)
        dy = np.asarray(call.cotangents["y"], np.float64) * (1 - p * (1 - s)) / (1 + p * (1 - s))
        r = registry.evaluate(call.op, ins, config=cfg, grad_outputs={"y": dy})
        return {**d, "grads": dict(r.grads)}
    expect(Spec(post=post), "group_norm_silu/normal_g4_f32_2x8x5x7", "backward",
           "dx matches the formula dy silu'(p)")
    expect(Spec(post=post), "group_norm_silu/normal_g4_f32_2x8x5x7", "backward",
           "the dy p s (1 - s) term with its sign flipped")


def test_group_norm_silu_grad_at_the_input_is_backward():
    """silu' taken at the op's input x where it belongs at the pre-activation p: the cotangent trick above
    (the op's own backward fed dy silu'(x) / silu'(p))."""
    def post(call, d):
        cfg, ins = call.config, dict(call.inputs)
        p = registry.evaluate("group_norm", ins, config=cfg).outputs["y"]
        x = np.asarray(ins["x"], np.float64)
        dsilu = lambda v: sig(v) * (1 + v * (1 - sig(v)))                 # noqa: E731
        dy = np.asarray(call.cotangents["y"], np.float64) * dsilu(x) / dsilu(p)
        r = registry.evaluate(call.op, ins, config=cfg, grad_outputs={"y": dy})
        return {**d, "grads": dict(r.grads)}
    expect(Spec(post=post), "group_norm_silu/normal_g4_f32_2x8x5x7", "backward", "silu'(x) at the op's input x")


def test_gated_norm_dz_from_the_raw_input_is_gate():
    """norm_before_gate: dz = dy x silu'(z) where dy n silu'(z) belongs: the gate's product on the other side of
    the norm."""
    def dz(call, d):
        x, z = (np.asarray(call.inputs[k], np.float64) for k in ("x", "z"))
        s = sig(z)
        return np.asarray(call.cotangents["y"], np.float64) * x * s * (1 + z * (1 - s))
    cid = next(e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == "gated_norm"
               and e["case"]["config"].get("norm_before_gate") and e["case"]["dtype"] == "float32")
    expect(Spec(post=grads(z=dz)), cid, "gate", "x (the input before the norm) where n")


def test_add_norm_dresidual_out_through_the_norm_backward_is_backward():
    """prenorm: ds = dnorm(dy + dresidual_out) where dnorm(dy) + dresidual_out belongs (the op's own backward fed
    dy + dresidual_out as y's cotangent and 0 as residual_out's: dx and dresidual follow; the parameter
    gradients kept right)."""
    def post(call, d):
        cot = {k: np.asarray(v, np.float64) for k, v in call.cotangents.items()}
        cot2 = {**cot, "y": cot["y"] + cot["residual_out"], "residual_out": np.zeros_like(cot["residual_out"])}
        r = registry.evaluate(call.op, dict(call.inputs), config=call.config, grad_outputs=cot2)
        keep = ("weight", "bias", "weight1", "bias1")
        return {**d, "grads": {k: (d["grads"][k] if k in keep else v) for k, v in r.grads.items()}}
    cid = next(e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == "add_norm"
               and e["case"]["config"].get("prenorm") and e["case"]["dtype"] == "float64")
    expect(Spec(post=post), cid, "backward", "dresidual_out passed through the norm's backward")


def test_adaptive_layer_norm_dx_from_dy_is_backward():
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        return centred(dy, x, call.config["eps"])
    expect(Spec(post=grads(x=dx)), "adaptive_layer_norm/normal_f32_3x20x12", "backward",
           "dx matches the formula with g = dy: (1 + scale) left out of g")


def test_add_norm_rms_backward_with_the_centred_term_is_backward():
    """norm='rms_norm' with LayerNorm's - mean(g) term in ds: dx and dresidual name it."""
    cid = "add_norm/normal_noaffine_rms_f16_2x3x16"

    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64) + np.asarray(call.inputs["residual"], np.float64)
        dy = np.asarray(call.cotangents["y"], np.float64)
        rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + call.config["eps"])
        extra = -rstd * dy.mean(-1, keepdims=True)
        return {**d, "grads": {**d["grads"], "x": d["grads"]["x"] + extra,
                               "residual": d["grads"]["residual"] + extra}}
    assert load_case(GOLDEN, cid).config["norm"] == "rms_norm"
    expect(Spec(post=post), cid, "backward", "the mean(g) term with coefficient -1 where 0 belongs")


def test_add_norm_centred_term_names_drowscale_too():
    """rowscale: drowscale (one value per row, too few for its own fit) follows from ds's coefficients."""
    cid = "add_norm/heavy_tail_rms_rs_f32_5x24"

    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        rs = np.asarray(call.inputs["rowscale"], np.float64)[..., None]
        s = x * rs + np.asarray(call.inputs.get("residual", 0.0), np.float64)
        dy = np.asarray(call.cotangents["y"], np.float64)
        w = np.asarray(call.inputs.get("weight", 1.0), np.float64) + call.config.get("weight_offset", 0.0)
        extra = -(dy * w).mean(-1, keepdims=True) / np.sqrt((s * s).mean(-1, keepdims=True) + call.config["eps"])
        gr = dict(d["grads"])
        gr["x"] = gr["x"] + extra * rs
        if "residual" in gr:
            gr["residual"] = gr["residual"] + extra
        gr["rowscale"] = gr["rowscale"] + (extra * x).sum(-1)
        return {**d, "grads": gr}
    case = load_case(GOLDEN, cid)
    assert case.config["norm"] == "rms_norm" and not case.config.get("dropout_p")
    d = diag(Spec(post=post), cid)
    assert d["mechanism"] == "backward" and "drowscale matches the formula" in d["message"], d["message"]


def test_add_norm_dweight1_from_dy_is_backward():
    """weight1's and bias1's gradients summed from dy where dy1 belongs."""
    def post(call, d):
        ins = {k: v for k, v in call.inputs.items() if k not in ("weight1", "bias1")}
        r = registry.evaluate(call.op, ins, config=call.config,
                              grad_outputs={k: v for k, v in call.cotangents.items() if k != "y1"})
        return {**d, "grads": {**d["grads"], "weight1": r.grads["weight"], "bias1": r.grads["bias"]}}
    assert load_case(GOLDEN, "add_norm/normal_p_par_f64_5x12").steps[0].inputs.get("bias1") is not None
    expect(Spec(post=post), "add_norm/normal_p_par_f64_5x12", "backward",
           "dweight1 matches the formula with dy where dy1 belongs")


def test_group_norm_mean_g_from_dy_is_backward():
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        N, C = x.shape[:2]
        G = call.config["num_groups"]
        w = np.asarray(call.inputs["weight"], np.float64).reshape(1, C, *([1] * (x.ndim - 2)))
        rs = lambda a: np.broadcast_to(a, x.shape).reshape(N * G, -1)   # noqa: E731
        return centred(rs(dy * w), rs(x), call.config["eps"], gm=rs(dy)).reshape(x.shape)
    expect(Spec(post=grads(x=dx)), "group_norm/normal_g4_f32_2x8x5x7", "backward",
           "the mean(g) term from dy (the weight left out of it)")


def test_instance_norm_projection_from_dy_is_backward():
    cid = "instance_norm/normal_f32_2x3x100"

    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        N, C = x.shape[:2]
        w = np.asarray(call.inputs["weight"], np.float64).reshape(1, C, *([1] * (x.ndim - 2)))
        rs = lambda a: np.broadcast_to(a, x.shape).reshape(N * C, -1)   # noqa: E731
        return centred(rs(dy * w), rs(x), call.config["eps"], gp=rs(dy)).reshape(x.shape)
    assert load_case(GOLDEN, cid).steps[0].training
    expect(Spec(post=grads(x=dx)), cid, "backward", "the x_hat mean(g x_hat) term from dy")


def test_batch_norm_dbias_from_g_is_backward():
    def db(call, d):
        dy = np.asarray(call.cotangents["y"], np.float64)
        w = np.asarray(call.inputs["weight"], np.float64).reshape(1, -1, *([1] * (dy.ndim - 2)))
        return (dy * w).sum(axis=tuple(i for i in range(dy.ndim) if i != 1))
    d = diag(Spec(post=grads(bias=db)), "batch_norm/normal_f32_6x4x25")
    assert d["mechanism"] == "backward" and "dbias matches the formula with g where dy belongs" in d["message"], \
        d["message"]


def test_layer_norm_backward_sums_over_a_block_of_rows_is_block():
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        return centred(dy * np.asarray(call.inputs["weight"], np.float64), x, call.config["eps"], k=4)
    expect(Spec(post=grads(x=dx)), "layer_norm/normal_f32_6x100", "block", "each block of 4 rows instead of each row")


def test_rms_norm_projection_from_dy_is_backward():
    """dx = rstd (g - x_hat mean(dy x_hat)): the weight left out of the projection term only."""
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        return centred(dy * np.asarray(call.inputs["weight"], np.float64), x, call.config["eps"], centre=False,
                       gp=dy)
    expect(Spec(post=grads(x=dx)), "rms_norm/normal_eps1e-05_f32_6x100", "backward",
           "dx matches the formula with the x_hat mean(g x_hat) term from dy")


# ---------------------------------------------------------------- what is named nothing
CASES = ("gated_norm/normal_f32_4x64", "dyt/normal_f32_3x20x12", "poly_norm/normal_f32_4x64",
         "group_norm_silu/normal_g4_f32_2x8x5x7", "adaptive_layer_norm/normal_f32_3x20x12",
         "add_norm/normal_p_par_f64_5x12", "group_norm/normal_g4_f32_2x8x5x7", "instance_norm/normal_f32_2x3x100",
         "batch_norm/normal_f32_6x4x25", "layer_norm/normal_f32_6x100", "rms_norm/normal_eps1e-05_f32_6x100")


@pytest.mark.parametrize("cid", CASES)
def test_the_correct_kernel_passes_and_noise_is_no_term(cid):
    """The specification passes; dx with a smooth per-element error of 5% (no term's change) names no
    backward term (whatever else the diagnosis says, no explanation comes from this family)."""
    assert check_case(Spec(), load_case(GOLDEN, cid)).status == "passed"

    def dx(call, d):
        v = np.asarray(d["grads"]["x"], np.float64)
        return v * (1 + 0.05 * np.sin(np.arange(v.size)).reshape(v.shape))
    d = diag(Spec(post=grads(x=dx)), cid)
    assert not any("matches the formula" in e["text"] for e in d.get("explained") or []), d["message"]


def test_the_reference_itself_is_never_explained():
    """explain_grad names nothing where got is the reference (within its bound)."""
    g = explain_terms.Grad((4, 3)).terms("t", [("a", 1.0, np.ones((4, 3))), ("b", 1.0, np.arange(12.).reshape(4, 3))])
    want = explain_terms.total(g.sets[0][1])
    g.alt("a variant", "backward", lambda: want * 2)
    assert explain_terms.explain_grad("dx", g, want, want, np.full((4, 3), 1e-6), fit_ratio) is None
    got = np.ones((4, 3)) + 2 * np.arange(12.).reshape(4, 3)          # the b term counted twice
    e = explain_terms.explain_grad("dx", g, got, want, np.full((4, 3), 1e-6), fit_ratio)
    assert e["mechanism"] == "backward" and "the b term counted twice" in e["text"], e


def test_a_scalar_is_named_only_by_an_alternative_that_alone_fits():
    g = explain_terms.Grad(()).terms("t", [("a", 1.0, np.array(1.0))])
    g.alt("one", "backward", lambda: np.array(2.0)).alt("other", "backward", lambda: np.array(2.0))
    assert explain_terms.explain_grad("dalpha", g, np.array(2.0), np.array(1.0), np.array(1e-6), fit_ratio) is None
    g.alts.pop()
    e = explain_terms.explain_grad("dalpha", g, np.array(2.0), np.array(1.0), np.array(1e-6), fit_ratio)
    assert e["text"] == "dalpha matches the formula with one", e


# ---------------------------------------------------------------- the decompositions are the specification
OPS = tuple(explain_terms.OPS)


@pytest.mark.parametrize("op", OPS)
def test_every_decomposition_sums_to_the_reference_gradient(op):
    """float64 golden cases of each op, every step with cotangents (eval calls with running statistics
    too): every gradient array the specification returns (but add_norm's masks' zeros) has a decomposition, and each of its term sets, with the specification's coefficients, is the reference
    gradient to 1e-12 of its largest value (or of its largest term's, where the terms cancel)."""
    man = store.read_manifest(GOLDEN)
    ids = [e["id"] for e in man["cases"] if e["case"]["op"] == op and e["case"]["dtype"] == "float64"
           and "const" not in e["id"]]
    checked = 0
    for cid in ids:
        case = load_case(GOLDEN, cid, manifest=man)
        for st in case.steps:
            if not st.cotangents:
                continue
            ref = registry.evaluate(op, st.inputs, config=case.config, grad_outputs=st.cotangents,
                                    state=dict(st.state) or None, training=st.training)
            dec = explain_terms.decompose(case, st.inputs, st.cotangents, st.training, ref, st.state)
            for name, want in ref.grads.items():
                if want is None or name in ("mask", "mask1"):
                    continue
                assert name in dec and dec[name].sets, (cid, name)
                want = np.asarray(want, np.float64)
                for title, terms in dec[name].sets:
                    v = explain_terms.total(terms)
                    # (of the largest term where the terms cancel: z_score's dx of two values is 0 up to rounding)
                    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300,
                                max(float(np.max(np.abs(c * a), initial=0.0)) for _, c, a in terms))
                    assert np.max(np.abs(v - want), initial=0.0) <= 1e-12 * scale, (cid, name, title)
                    checked += 1
    assert checked >= 3, (op, ids)


def test_the_sampled_screen_never_passes_what_the_whole_array_fails():
    """scaled(): a strided sample screens a large array; an element beyond its bound outside the sample
    still fails it, and a value within its bound everywhere passes."""
    n = 5 * explain_terms.SAMPLE + 3
    want = np.linspace(1.0, 2.0, n)
    E = np.full(n, 1e-9)
    fr = explain_terms.scaled(fit_ratio, want)
    got = want.copy()
    got[1] += 1e-6                          # index 1: not on the sample's stride
    assert n // explain_terms.SAMPLE > 1 and fr(got, want, E) > 1
    assert fr(want, want, E) <= 1
    assert fr(want + 1e-6, want, E) > 1


def test_dyt_dx_with_tanh_grad_from_the_output_is_backward():
    """dx = dy w (1 - y^2) alpha: tanh' taken from the returned y = w t + b instead of t."""
    def dx(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        a = float(np.reshape(call.inputs["alpha"], ()))
        w, b = np.asarray(call.inputs["weight"], np.float64), np.asarray(call.inputs["bias"], np.float64)
        y = w * np.tanh(a * x) + b
        return dy * w * (1 - y * y) * a
    expect(Spec(post=grads(x=dx)), "dyt/normal_f32_3x20x12", "backward", "dx matches the formula with tanh' as 1 - y^2")


def test_batch_norm_eval_dweight_from_g_is_backward():
    """An eval call with running statistics: dweight = sum(dy w x_hat), x_hat by the running statistics."""
    cid = "batch_norm/normal_eval_bf16_2x3x4"

    def dw(call, d):
        x, dy = np.asarray(call.inputs["x"], np.float64), np.asarray(call.cotangents["y"], np.float64)
        cs = (1, -1) + (1,) * (x.ndim - 2)
        rm, rv = (np.asarray(call.state[k], np.float64).reshape(cs) for k in ("running_mean", "running_var"))
        w = np.asarray(call.inputs["weight"], np.float64).reshape(cs)
        xh = (x - rm) / np.sqrt(rv + call.config.get("eps", 1e-5))
        return (dy * w * xh).sum(axis=tuple(i for i in range(x.ndim) if i != 1))
    assert not load_case(GOLDEN, cid).steps[0].training
    expect(Spec(post=grads(weight=dw)), cid, "backward", "dweight matches the formula with g x_hat where dy x_hat")


def test_batch_norm_dx_with_its_means_over_the_batch_alone_is_group():
    """dx's mean(g) and mean(g x_hat) per channel and position (over the batch axis only) where the batch and the
    positions belong: named with the axes its means span, rule 10's group (a backward reduction over a part of each
    slice)."""
    def dx(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        w = np.asarray(call.inputs["weight"], np.float64).reshape(1, -1, 1)
        dy = np.asarray(call.cotangents["y"], np.float64)
        ax = (0, 2)
        mean, var = x.mean(axis=ax, keepdims=True), x.var(axis=ax, keepdims=True)
        r = 1 / np.sqrt(var + call.config.get("eps", 1e-5))
        xh, g = (x - mean) * r, dy * w
        m = lambda a: a.mean(axis=0, keepdims=True)                     # noqa: E731
        return r * (g - m(g) - xh * m(g * xh))
    expect(Spec(post=grads(x=dx)), "batch_norm/normal_f32_6x4x25", "group", "over the axes (0,) of (6, 4, 25) only")


def test_group_norm_dx_with_its_means_over_one_channel_is_group():
    """group_norm's dx means over each channel's positions where the whole group belongs: the span of a
    backward reduction (mechanisms.py's "group")."""
    def dx(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        N, C = x.shape[:2]
        G = call.config["num_groups"]
        xg = x.reshape(N, G, -1)
        mean, var = xg.mean(axis=2, keepdims=True), xg.var(axis=2, keepdims=True)
        r = 1 / np.sqrt(var + call.config.get("eps", 1e-5))
        xh = ((xg - mean) * r).reshape(x.shape)
        rr = np.repeat(r.reshape(N, G), C // G, axis=1).reshape((N, C) + (1,) * (x.ndim - 2))
        w = np.asarray(call.inputs["weight"], np.float64).reshape((1, C) + (1,) * (x.ndim - 2))
        g = np.asarray(call.cotangents["y"], np.float64) * w
        ax = tuple(range(2, x.ndim))
        m = lambda a: a.mean(axis=ax, keepdims=True)                       # noqa: E731
        return rr * (g - m(g) - xh * m(g * xh))
    expect(Spec(post=grads(x=dx)), "group_norm/normal_g4_f32_2x8x5x7", "group", "over the axes")


def test_the_ds_db_form_with_ds_of_g_x_is_the_specifications_dx():
    """explain_terms.x_form (c2, c3: the form the x-form alternative changes) with ds = sum(g x) is the
    specification's centred dx, rstd (g - mean(g) - x_hat mean(g x_hat)), on random slices."""
    rng = np.random.default_rng(25)
    xs, g = rng.normal(3.0, 2.0, (5, 12)), rng.normal(size=(5, 12))
    mean = xs.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((xs - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    xh = (xs - mean) * rstd
    want = rstd * (g - g.mean(axis=1, keepdims=True) - xh * (g * xh).mean(axis=1, keepdims=True))
    got = explain_terms.x_form(g, xs, mean, rstd, 12, (g * xs).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    wrong = explain_terms.x_form(g, xs, mean, rstd, 12, (g * xh).sum(axis=1, keepdims=True))
    assert np.max(np.abs(wrong - want)) > 1e-3          # the alternative is another dx
