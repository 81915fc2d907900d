"""Derived bounds for lp_normalize, local_response_norm, weight_norm, min_max_scale and offline_batch_norm
(refnorm/check/bounds/<op>.py, bounds/__init__.py), validated on the golden set:

* correct implementations pass every golden case of the op, in every dtype: a straightforward
  float32 NumPy kernel (float16/bfloat16 inputs upcast to float32, np.sum, one final rounding to the
  case dtype; float64 cases in float64), the same for min_max_scale with argmin-style tie routing, and
  torch in float32 (F.normalize, F.local_response_norm, torch._weight_norm, an amin/amax composition
  for min_max_scale) with autograd;
* the worst ratio (excess / bound) of the NumPy kernel is not absurdly small (the bound is not vacuous);
* planted bugs (the kind real kernels have) fail at least one golden case each;
* kernels holding the norm / scale / range in the case dtype pass stats_d (epi_d) but not strict, and
  torch's own float16/bfloat16 kernels pass epi_d, except where a d-held value overflows;
* lp_normalize's eps clamp: near norm == eps either gradient branch passes, elsewhere only the right one;
* min_max_scale's documented blind spot (full gradient mass to every tied element) stays documented;
* offline_batch_norm, bounded as batch_norm: the planted float32 kernel's batch_norm passes, its planted
  batch_norm bugs fail and are named by their mechanism.

``python tests/test_bounds_more.py`` prints the per-op/dtype worst-ratio table and the cases that
catch each planted bug.
"""
from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pytest

from refnorm.check import run_check
from refnorm.check.backends.base import Contract, Returned
from refnorm.check.precision import round_to
from refnorm.norms import local_response_norm as lrn_ref

from helpers import StrictTestBackend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
OPS = ("lp_normalize", "local_response_norm", "weight_norm", "min_max_scale")


# ------------------------------------------------------------------------------------ plumbing
def _acc(call):
    return np.float64 if call.dtype == "float64" else np.float32


def _up(call, a):
    return None if a is None else np.asarray(a).astype(_acc(call))


def _out(a, dtype):
    return round_to(np.asarray(a, dtype=np.float64), dtype)


def _rd(a, call):
    """``a`` rounded to the case dtype, kept in the accumulation dtype (an intermediate held in d)."""
    return round_to(a, call.dtype).astype(a.dtype)


def _axes(dim, ndim):
    dim = [dim] if isinstance(dim, int) else list(dim)
    return tuple(sorted(d % ndim for d in dim))


class FnBackend:
    """A backend from one function call -> (outputs, grads) in the accumulation dtype."""

    def __init__(self, op, fn, name, contract=Contract("strict", "block"), **bug):
        self.op, self.fn, self.name, self._contract, self.bug = op, fn, name, contract, bug

    def available(self):
        return None

    def supports(self, call):
        return None if call.op == self.op else f"{self.name} implements {self.op} only"

    def contract(self, call):
        return self._contract

    def run(self, call):
        with np.errstate(all="ignore"):
            outs, grads = self.fn(call, **self.bug)
        d = call.dtype
        return Returned({k: _out(v, d) for k, v in outs.items()},
                        {k: _out(v, d) for k, v in grads.items()} if call.cotangents else {})


# ------------------------------------------------------------------------------- numpy kernels
def lp_np(call, bug=None):
    c = call.config
    x = _up(call, call.inputs["x"])
    p, eps, rule = float(c.get("p", 2.0)), float(c.get("eps", 1e-12)), c.get("zero_rule", "torch")
    ax = _axes(c.get("dim", 1), x.ndim)
    a = x if bug == "p1_no_abs" else np.abs(x)
    if p == 1.0:
        N = a.sum(axis=ax, keepdims=True)
    elif p == 2.0:
        N = np.sqrt((x * x).sum(axis=ax, keepdims=True))
    else:
        N = ((a ** p).sum(axis=ax, keepdims=True)) ** (1.0 / p)
    if bug == "norm_in_dtype":
        N = _rd(N, call)
    if rule == "torch":
        D = N + x.dtype.type(eps) if bug == "eps_added" else np.maximum(N, x.dtype.type(eps))
        y = x / D
        big = N >= x.dtype.type(eps)
    else:
        big = N != 0
        y = np.where(big, x / np.where(big, N, 1), 0)
    outs = {"y": y, "norm": N}
    if not call.cotangents:
        return outs, {}
    dy = _up(call, call.cotangents["y"])
    safe = np.where(big, N, 1)
    U = x / safe
    if p == 2.0 or bug == "p2_grad":
        W = U
    elif p == 1.0:
        W = np.sign(U)
    else:
        W = np.where(U == 0, 0, np.sign(U) * np.abs(U) ** (p - 1.0))
    T = (dy * U).sum(axis=ax, keepdims=True)
    proj = (dy - W * T) / safe
    if bug == "proj_everywhere":
        small = proj
    else:
        small = dy / x.dtype.type(eps) if rule == "torch" and eps > 0 else np.zeros_like(dy)
    return outs, {"x": np.where(big, proj, small)}


def _wsum(a, lo, hi):
    """out[:, c] = sum_{c-lo <= c' <= c+hi} a[:, c'] (zero padded), in a's dtype."""
    C = a.shape[1]
    out = np.zeros_like(a)
    for o in range(-min(lo, C), min(hi, C) + 1):
        if o >= 0:
            out[:, :C - o] += a[:, o:]
        else:
            out[:, -o:] += a[:, :C + o]
    return out


def lrn_np(call, bug=None):
    c = call.config
    x = _up(call, call.inputs["x"])
    size, alpha = int(c["size"]), float(c.get("alpha", 1e-4))
    beta, k = float(c.get("beta", 0.75)), float(c.get("k", 1.0))
    win = c.get("window", "torch")
    if bug == "other_window":
        win = "onnx" if win == "torch" else "torch"
    lo, hi = lrn_ref.reach(size, win)
    coef = alpha if bug == "alpha_not_over_size" else alpha / size
    s = k + coef * _wsum(x * x, lo, hi)
    if bug == "scale_in_dtype":
        s = _rd(s, call)
    P = s ** -beta
    outs = {"y": x * P, "scale": s}
    if not call.cotangents:
        return outs, {}
    dy = _up(call, call.cotangents["y"])
    blo, bhi = (lo, hi) if bug == "untransposed_backward" else (hi, lo)
    B = _wsum(dy * x * P / s, blo, bhi)
    c2 = (1.0 if bug == "no_factor2" else 2.0) * alpha * beta / size
    return outs, {"x": dy * P - c2 * x * B}


def wn_np(call, bug=None):
    c = call.config
    v, g = _up(call, call.inputs["v"]), _up(call, call.inputs["g"])
    dim = c.get("dim", 0)
    ax = tuple(range(v.ndim)) if dim is None else tuple(a for a in range(v.ndim) if a != dim % v.ndim)
    keep = (1,) * v.ndim if dim is None else tuple(s if a == dim % v.ndim else 1 for a, s in enumerate(v.shape))
    gk = g.reshape(keep)
    nax = ax
    if bug == "wrong_axis" and dim is not None:
        nax = (dim % v.ndim,)                      # the norm over the kept axis instead of the others
    elif bug == "whole_tensor":
        nax = tuple(range(v.ndim))                 # torch's dim=-1 reading: one norm for the whole tensor
    N = np.sqrt((v * v).sum(axis=nax, keepdims=True))
    if bug in ("norm_in_dtype", "scale_in_dtype"):
        N = _rd(N, call)
    Nb = np.broadcast_to(N, v.shape)
    w = v * (_rd(gk / N, call) if bug == "scale_in_dtype" else gk / Nb)   # torch's half path: v * (g / N)
    outs = {"w": w}
    if nax == ax:
        outs["norm"] = N.reshape(() if dim is None else keep)
    if not call.cotangents:
        return outs, {}
    dw = _up(call, call.cotangents["w"])
    dgk = ((dw * v).sum(axis=ax, keepdims=True) / N) if nax == ax else (dw * v / Nb).sum(axis=ax, keepdims=True)
    if bug == "dg_no_norm":
        dv = (gk / N) * (dw - v * (dgk / N))
        dgk = (dw * v).sum(axis=ax, keepdims=True)
    else:
        dv = (gk / Nb) * (dw - v * (dgk / Nb))
    return outs, {"v": dv, "g": dgk.reshape(g.shape)}


def mm_np(call, bug=None, routing="even"):
    c = call.config
    x = _up(call, call.inputs["x"])
    w, b = _up(call, call.inputs.get("weight")), _up(call, call.inputs.get("bias"))
    eps = 0.0 if bug == "no_eps" else float(c.get("eps", 0.0))
    ax = _axes(c.get("dim", -1), x.ndim)
    pv = [s if i in ax else 1 for i, s in enumerate(x.shape)]
    wv = None if w is None else w.reshape(pv)
    bv = None if b is None else b.reshape(pv)
    mn, mx = x.min(axis=ax, keepdims=True), x.max(axis=ax, keepdims=True)
    R = (mx - mn) + x.dtype.type(eps)
    if bug == "range_in_dtype":
        R = _rd(R, call)
    safe = np.where(R == 0, 1, R)
    yh = np.where(R == 0, 0, (x - mn) / safe)
    if bug == "yh_in_dtype":
        yh = _rd(yh, call)
    y = yh if wv is None else yh * wv
    if bv is not None:
        y = y + bv
    outs = {"y": y, "min": mn, "max": mx}
    if not call.cotangents:
        return outs, {}
    dy = _up(call, call.cotangents["y"])
    g = dy if (wv is None or bug == "grad_no_weight") else dy * wv
    s1 = g.sum(axis=ax, keepdims=True)
    s2 = (g * yh).sum(axis=ax, keepdims=True)
    at_min, at_max = x == mn, x == mx
    if routing == "first":       # all the mass to the first tied element (C order of the slice), as argmin
        at_min, at_max = _first(at_min, ax), _first(at_max, ax)
    n_min = at_min.sum(axis=ax, keepdims=True)
    n_max = at_max.sum(axis=ax, keepdims=True)
    if bug == "all_tied_full_mass":
        n_min, n_max = np.ones_like(n_min), np.ones_like(n_max)
    amin = np.where(at_min, (s2 - s1) / np.maximum(n_min, 1), 0)
    if bug == "no_min_term":
        amin = np.zeros_like(amin)
    num = g + amin - np.where(at_max, s2 / np.maximum(n_max, 1), 0)
    dx = np.where(R == 0, 0, num / safe)
    other = tuple(i for i in range(x.ndim) if i not in ax)
    grads = {"x": dx}
    if w is not None:
        grads["weight"] = (dy * yh).sum(axis=other).reshape(w.shape)
    if b is not None:
        grads["bias"] = dy.sum(axis=other).reshape(b.shape)
    return outs, grads


def _first(mask, ax):
    """Keep only the first True of each slice over ``ax`` (C order of the slice's elements)."""
    keep = [i for i in range(mask.ndim) if i not in ax]
    perm = keep + list(ax)
    m = mask.transpose(perm)
    flat = m.reshape(m.shape[:len(keep)] + (-1,))
    first = np.zeros_like(flat)
    idx = np.argmax(flat, axis=-1)[..., None]
    np.put_along_axis(first, idx, np.take_along_axis(flat, idx, axis=-1), axis=-1)
    return first.reshape(m.shape).transpose(np.argsort(perm))


# ------------------------------------------------------------------------------- torch kernels
def _torch():
    return pytest.importorskip("torch", reason="torch not installed (pip install torch==2.13.0)")


def _t(torch, call, a, native=False):
    """float32 (float64 for float64 cases), or the case dtype itself when ``native``."""
    if native:
        dt = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
              "bfloat16": torch.bfloat16}[call.dtype]
    else:
        dt = torch.float64 if call.dtype == "float64" else torch.float32
    return torch.tensor(np.asarray(a).astype(np.float64), dtype=dt, requires_grad=True)


def _run_torch(call, fwd, names, native=False):
    torch = _torch()
    ins = {k: _t(torch, call, v, native) for k, v in call.inputs.items()}
    outs = fwd(torch, ins)
    res = {k: v.detach().double().numpy() for k, v in outs.items()}
    grads = {}
    if call.cotangents:
        dyn = next(iter(call.cotangents))
        cot = _t(torch, call, call.cotangents[dyn], native).detach()
        gs = torch.autograd.grad(outs[dyn], [ins[k] for k in names if k in ins], cot)
        grads = {k: g.double().numpy() for k, g in zip([k for k in names if k in ins], gs)}
    return res, grads


def lp_torch(call, native=False):
    c = call.config
    p, eps, rule = float(c.get("p", 2.0)), float(c.get("eps", 1e-12)), c.get("zero_rule", "torch")
    ax = _axes(c.get("dim", 1), np.ndim(call.inputs["x"]))

    def fwd(torch, i):
        F = torch.nn.functional
        x = i["x"]
        if rule == "torch":
            return {"y": F.normalize(x, p=p, dim=ax, eps=eps)}
        n = x.norm(p=p, dim=ax, keepdim=True)
        z = n == 0
        return {"y": torch.where(z, torch.zeros_like(x), x / torch.where(z, torch.ones_like(n), n))}
    return _run_torch(call, fwd, ["x"], native)


def lrn_torch(call, native=False):
    c = call.config
    size = int(c["size"])
    flip = c.get("window", "torch") == "onnx" and size % 2 == 0   # onnx reach = torch's on flipped channels

    def fwd(torch, i):
        x = i["x"].flip(1) if flip else i["x"]
        y = torch.nn.functional.local_response_norm(x, size, alpha=float(c.get("alpha", 1e-4)),
                                                    beta=float(c.get("beta", 0.75)), k=float(c.get("k", 1.0)))
        return {"y": y.flip(1) if flip else y}
    return _run_torch(call, fwd, ["x"], native)


def wn_torch(call, native=False):
    dim = call.config.get("dim", 0)
    v_shape, g_shape = np.shape(call.inputs["v"]), np.shape(call.inputs["g"])
    nd = len(v_shape)
    keep = () if dim is None else tuple(s if a == dim % nd else 1 for a, s in enumerate(v_shape))

    def fwd(torch, i):
        return {"w": torch._weight_norm(i["v"], i["g"].reshape(keep), -1 if dim is None else dim % nd)}
    res, grads = _run_torch(call, fwd, ["v", "g"], native)
    if "g" in grads:
        grads["g"] = grads["g"].reshape(g_shape)
    return res, grads


def mm_torch(call, native=False):
    c = call.config
    eps = float(c.get("eps", 0.0))
    x_shape = np.shape(call.inputs["x"])
    ax = _axes(c.get("dim", -1), len(x_shape))
    pv = [s if i in ax else 1 for i, s in enumerate(x_shape)]

    def fwd(torch, i):
        x = i["x"]
        mn, mx = x.amin(dim=ax, keepdim=True), x.amax(dim=ax, keepdim=True)
        r = (mx - mn) + eps
        z = r == 0
        yh = torch.where(z, torch.zeros_like(x), (x - mn) / torch.where(z, torch.ones_like(r), r))
        y = yh * i["weight"].reshape(pv) if "weight" in i else yh
        if "bias" in i:
            y = y + i["bias"].reshape(pv)
        return {"y": y, "min": mn, "max": mx}
    return _run_torch(call, fwd, ["x", "weight", "bias"], native)


NUMPY = {"lp_normalize": lp_np, "local_response_norm": lrn_np, "weight_norm": wn_np, "min_max_scale": mm_np}
TORCH = {"lp_normalize": lp_torch, "local_response_norm": lrn_torch, "weight_norm": wn_torch,
         "min_max_scale": mm_torch}
# torch CPU's norm reductions (vector_norm: F.normalize's x.norm, and _weight_norm) accumulate in a few
# vector lanes, each serially over n/lanes terms: at n = 65536 (8 AVX2 lanes of 8192 terms) ||v||
# errs by 344 u, beyond the block model (2 sqrt(n) + 2 = 514 u on the sum of squares, ~257 u on the
# norm); weight_norm/mean1e3_f16_1x65536 fails at 1.13 x bound under "block". The contract that
# describes this kernel is "serial"; LRN (windows of <= size terms) and the min_max composition
# (cascade sums) are block reductions.
TORCH_REDUCTION = {"lp_normalize": "serial", "weight_norm": "serial", "local_response_norm": "block",
                   "min_max_scale": "block"}


def torch_backend(op, reduction=None):
    return FnBackend(op, lambda call: TORCH[op](call), "torch32",
                     Contract("strict", reduction or TORCH_REDUCTION[op]))

# planted bugs: (op, bug) -> what it is. Each must fail at least one golden case.
BUGS = {
    ("lp_normalize", "eps_added"): "x / (norm + eps) instead of x / max(norm, eps)",
    ("lp_normalize", "norm_in_dtype"): "the norm rounded to the case dtype before the division",
    ("lp_normalize", "p2_grad"): "the p = 2 projection W = u used for every p (p = 1 needs sign(u))",
    ("lp_normalize", "p1_no_abs"): "p = 1 norm as sum(x), not sum|x| (the ONNX reference evaluator's bug)",
    ("lp_normalize", "proj_everywhere"): "the projection gradient also where the eps clamp is active",
    ("local_response_norm", "alpha_not_over_size"): "alpha instead of alpha/size",
    ("local_response_norm", "other_window"): "the ONNX window for the torch convention (and back)",
    ("local_response_norm", "untransposed_backward"): "the forward window in the backward sum",
    ("local_response_norm", "no_factor2"): "the backward's 2 alpha beta/size written alpha beta/size",
    ("weight_norm", "wrong_axis"): "the norm over the dim axis instead of every other axis",
    ("weight_norm", "whole_tensor"): "one norm over the whole tensor (torch's dim=-1 reading) for every dim",
    ("weight_norm", "norm_in_dtype"): "the norm rounded to the case dtype",
    ("weight_norm", "dg_no_norm"): "dg = sum(dw v), missing the 1/||v||",
    ("min_max_scale", "no_eps"): "the range without eps",
    ("min_max_scale", "grad_no_weight"): "dx from dy instead of dy * weight",
    ("min_max_scale", "no_min_term"): "the gradient reaching the min dropped",
}


def _check(backend, op):
    return run_check(backend, GOLDEN, ops=[op])


def _worst(report):
    w = defaultdict(float)
    for c in report.cases:
        if c.status in ("passed", "partial"):
            w[c.dtype] = max(w[c.dtype], c.worst_ratio)
    return dict(w)


def _assert_passes(report):
    """Nothing fails or errors; a partial case (an ill-posed array: bound >= its scale) is no failure,
    but it must be that, never an unchecked array."""
    bad = [(c.id, c.status, c.message) for c in report.cases if c.status not in ("passed", "partial")]
    assert not bad, bad
    assert all("unchecked" not in c.message for c in report.cases if c.status == "partial")
    assert report.count("passed") > 0


# ---------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("op", OPS)
def test_correct_numpy_float32_kernel_passes(op):
    rep = _check(FnBackend(op, NUMPY[op], "np32"), op)
    _assert_passes(rep)
    worst = _worst(rep)
    # not vacuous: somewhere a correct kernel uses a visible share of its bound
    assert max(worst.values()) > 1e-3, worst


def test_correct_min_max_first_index_routing_passes():
    """A kernel routing the min/max gradient to one tied element (argmin/argmax) is correct too."""
    rep = _check(FnBackend("min_max_scale", mm_np, "np32-first", routing="first"), "min_max_scale")
    _assert_passes(rep)


@pytest.mark.parametrize("op", OPS)
def test_correct_torch_float32_passes(op):
    _torch()
    rep = _check(torch_backend(op), op)
    _assert_passes(rep)


@pytest.mark.parametrize("op,bug", sorted(BUGS))
def test_planted_bug_is_caught(op, bug):
    rep = _check(FnBackend(op, NUMPY[op], f"np32-{bug}", bug=bug), op)
    errors = [(c.id, c.message) for c in rep.cases if c.status == "error"]
    assert not errors, errors
    assert rep.count("failed") >= 1, f"{bug} ({BUGS[(op, bug)]}) passed every golden case"


# kernels that hold an intermediate in the case dtype: bugs under "strict", correct under the contract
# that declares it, except where the d-held value overflows (a float16 norm of values near 1e4 is
# 1e5 > 65504, so y = x / inf = 0): no rounding-error bound covers that, and those cases must fail.
# Underflow is in the bound (eta_d/|value|; a range of 1e-12 held in float16 leaves dx unconstrained).
# LOWP: (op, variant) -> (contract, the held intermediates as functions of the reference result).
LOWP = {
    ("lp_normalize", "norm_in_dtype"): ("stats_d", lambda i, r, c: [r.outputs["norm"]]),
    ("weight_norm", "norm_in_dtype"): ("stats_d", lambda i, r, c: [r.outputs["norm"]]),
    ("weight_norm", "scale_in_dtype"): ("stats_d", lambda i, r, c: [r.outputs["norm"], np.asarray(i["g"]).reshape(
        r.outputs["norm"].shape) / r.outputs["norm"]]),
    ("local_response_norm", "scale_in_dtype"): ("stats_d", lambda i, r, c: [r.outputs["scale"]]),
    ("min_max_scale", "range_in_dtype"): ("stats_d", lambda i, r, c: [r.outputs["max"] - r.outputs["min"]
                                                                      + float(c.get("eps", 0.0))]),
    ("min_max_scale", "yh_in_dtype"): ("epi_d", lambda i, r, c: []),
}


def _out_of_range(op, held_of):
    """Golden case ids where a held intermediate overflows in the case dtype."""
    import refnorm
    from refnorm.golden import commands, store
    man = store.read_manifest(GOLDEN)
    bad = set()
    for e in man["cases"]:
        if e["case"]["op"] != op:
            continue
        case = commands.load_case(GOLDEN, e["id"], manifest=man)
        ins = {k: np.asarray(v, dtype=np.float64) for k, v in case.steps[0].inputs.items()}
        res = refnorm.evaluate(op, ins, config=dict(case.config))
        for h in held_of(ins, res, case.config):
            h = np.abs(np.asarray(h, dtype=np.float64))
            r = np.abs(round_to(h, case.dtype).astype(np.float64))
            if np.any(np.isinf(r) & np.isfinite(h)):
                bad.add(case.id)
    return bad


@pytest.mark.parametrize("op,variant", sorted(LOWP))
def test_intermediate_in_case_dtype_passes_its_contract(op, variant):
    kind, held_of = LOWP[(op, variant)]
    rep = _check(FnBackend(op, NUMPY[op], f"np32-{variant}", Contract(kind, "block"), bug=variant), op)
    failed = {c.id for c in rep.cases if c.status not in ("passed", "partial")}
    assert failed == _out_of_range(op, held_of), [(c.id, c.message) for c in rep.cases if c.id in failed]
    strict = _check(FnBackend(op, NUMPY[op], f"np32-{variant}", bug=variant), op)
    assert strict.count("failed") >= 1, f"{variant} passes the strict contract: the strict bound is too loose"


# torch CPU's own float16/bfloat16 kernels (every op rounds its result to d; autograd in d) under
# epi_d: they pass every golden case but those where an intermediate overflows float16 (x*x for
# |x| > 256 in LRN, whose scale then is inf; a norm > 65504), and LRN's avg_pool3d (inputs of 4+
# dimensions) is not implemented for float16/bfloat16 on CPU (NotImplementedError: skipped, not judged).
NATIVE_OVERFLOW = {
    "lp_normalize": lambda i, r: [r.outputs["norm"]],
    "local_response_norm": lambda i, r: [r.outputs["scale"], np.asarray(i["x"]) ** 2],
    "weight_norm": lambda i, r: [],
    "min_max_scale": lambda i, r: [],
}


@pytest.mark.parametrize("op", OPS)
def test_torch_native_low_precision_passes_epi_d(op):
    _torch()
    be = FnBackend(op, TORCH[op], "torch-native", Contract("epi_d", TORCH_REDUCTION[op]), native=True)
    rep = run_check(be, GOLDEN, ops=[op], dtypes=["float16", "bfloat16"])
    errors = [(c.id, c.message) for c in rep.cases if c.status == "error" and "not implemented for" not in c.message]
    assert not errors, errors
    failed = {c.id for c in rep.cases if c.status == "failed"}
    unjudged = {c.id for c in rep.cases if c.status == "error" or (c.status == "skipped" and "not implemented for"
                                                                     in c.message)}
    assert failed == _out_of_range(op, lambda i, r, c: NATIVE_OVERFLOW[op](i, r)) - unjudged, \
        [(c.id, c.message) for c in rep.cases if c.status == "failed"]
    assert rep.count("passed") > 0


def test_lp_eps_clamp_branch_ambiguity_covers_both_branches():
    """Rows whose norm lies within the norm's error of eps: a correct kernel may take either branch of
    the (discontinuous) gradient; the bound accepts both there, and only there."""
    from refnorm.check.bounds import bounds
    from refnorm.check.precision import excess
    import refnorm
    rng = np.random.default_rng(7)
    eps = 0.3
    r = rng.standard_normal((6, 7))
    r /= np.sqrt((r * r).sum(axis=1, keepdims=True))
    rel = np.array([-3e-7, -6e-8, 6e-8, 3e-7, -1e-3, 1e-3])[:, None]     # 4 rows in the zone, 2 far
    x = (r * eps * (1 + rel)).astype(np.float32).astype(np.float64)
    dy = rng.standard_normal((6, 7)).astype(np.float32).astype(np.float64)
    cfg = {"dim": -1, "eps": eps}
    res = refnorm.evaluate("lp_normalize", {"x": x}, config=cfg, grad_outputs={"y": dy})
    E = bounds("lp_normalize", inputs={"x": x}, config=cfg, training=True, cotangents={"y": dy}, state={},
               ref_state={}, contract=Contract("strict", "block"), case_dtype="float32")["grads"]["x"]
    N = np.sqrt((x * x).sum(axis=1, keepdims=True))
    proj = (dy - (x / N) * (dy * x / N).sum(axis=1, keepdims=True)) / N
    small = dy / eps
    for branch in (proj, small):
        ok = (excess(branch.astype(np.float32), res.grads["x"]) <= E).all(axis=1)
        assert ok[:4].all(), ok
    # far from eps only the reference's own branch passes
    assert not (excess(small.astype(np.float32), res.grads["x"]) <= E)[5].all()
    assert not (excess(proj.astype(np.float32), res.grads["x"]) <= E)[4].all()


def test_min_max_full_mass_to_every_tie_is_invisible_per_element():
    """The documented blind spot (bounds/min_max_scale.py): giving the FULL min/max gradient to EVERY
    tied element looks, element by element, like a correct kernel routing it to that one element, so
    a per-element bound that accepts argmin routing cannot fail it. Only the slice sum (sum dx = 0)
    shows it. If this starts failing, the tie allowance changed: update the docstring."""
    rep = _check(FnBackend("min_max_scale", mm_np, "np32-alltied", bug="all_tied_full_mass"), "min_max_scale")
    assert rep.count("failed") == 0


# ------------------------------------------------------------------------- offline_batch_norm
class _OfflineAsBatchNorm(StrictTestBackend):
    """offline_batch_norm computed by the planted float32 kernel's batch_norm (tests/planted/emulated.py):
    the call read as batch_norm's (torch convention; iters -> num_batches_tracked), r = 1 returned."""

    def __init__(self, mutation=None):
        import sys
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from planted.emulated import EmulatedBackend
        self.inner = EmulatedBackend(mutation)
        self.name = "offline-as-" + self.inner.name

    def run(self, call):
        from refnorm.check.backends.base import Call
        st = {k: v for k, v in call.state.items() if k != "iters"}
        if "iters" in call.state:
            st["num_batches_tracked"] = np.asarray(call.state["iters"]).reshape(())
        cfg = {"momentum": call.config["momentum"], "eps": call.config["eps"], "convention": "torch"}
        r = self.inner.run(Call("batch_norm", call.dtype, cfg, call.training, call.inputs, call.cotangents, st))
        state = {k: v for k, v in r.state.items() if k != "num_batches_tracked"}
        if "num_batches_tracked" in r.state:
            state["iters"] = np.asarray(r.state["num_batches_tracked"]).reshape(np.shape(call.state["iters"]))
        y = np.asarray(r.outputs["y"])
        outs = {**r.outputs, "r": np.ones(np.shape(call.inputs["x"])[1], dtype=y.dtype)}
        return Returned(outs, r.grads, state)


def test_offline_batch_norm_is_judged_with_batch_norms_bounds_and_diagnosed_with_its_variants():
    """offline_batch_norm (batch_norm in the offline framework's terms) is bounded as batch_norm: a correct
    float32 kernel passes every golden case, every array verified or reported unconstrained, none
    unchecked; planted batch_norm bugs fail and are named by their mechanism."""
    rep = run_check(_OfflineAsBatchNorm(), GOLDEN, ops=["offline_batch_norm"])
    assert rep.cases and all(c.status in ("passed", "partial") for c in rep.cases), [
        (c.id, c.message) for c in rep.cases if c.status not in ("passed", "partial")]
    assert sum(c.status == "passed" for c in rep.cases) > len(rep.cases) // 2
    judged = [a for c in rep.cases for a in c.arrays]
    assert {a.name for a in judged} >= {"y", "mean", "rstd", "r", "x", "weight", "running_mean", "running_var",
                                         "iters"}
    for mutation, mech in (("running_var_biased", "bessel"), ("no_B_term", "backward"), ("one_pass_clamp", "one_pass")):
        bad = run_check(_OfflineAsBatchNorm(mutation), GOLDEN, ops=["offline_batch_norm"])
        failed = [c for c in bad.cases if c.status == "failed"]
        assert failed, mutation
        named = [c.diagnosis["mechanism"] for c in failed if c.diagnosis and c.diagnosis["matched"]]
        assert named and set(named) == {mech}, (mutation, [(c.id, c.diagnosis["message"]) for c in failed])


# ------------------------------------------------------------------------------------ the table
def main():
    impls = [("numpy-f32", lambda op: FnBackend(op, NUMPY[op], "np32"))]
    try:
        import torch  # noqa: F401
        impls.append(("torch-f32 (declared)", torch_backend))
        impls.append(("torch-f32 (block)", lambda op: torch_backend(op, "block")))
    except ImportError:
        pass
    impls.append(("numpy-f32 argmin routing", lambda op: FnBackend(op, mm_np, "np32-first", routing="first")
                  if op == "min_max_scale" else None))
    print(f"{'op':22s} {'impl':26s} " + " ".join(f"{d:>10s}" for d in ("float64", "float32", "float16", "bfloat16"))
          + "  status")
    for op in OPS:
        for name, mk in impls:
            be = mk(op)
            if be is None:
                continue
            rep = _check(be, op)
            w = _worst(rep)
            st = f"{rep.count('passed')} passed, {rep.count('failed')} failed, {rep.count('error')} errors"
            print(f"{op:22s} {name:26s} " + " ".join(f"{w[d]:10.3g}" if d in w else f"{'-':>10s}"
                                                    for d in ("float64", "float32", "float16", "bfloat16")) + "  " + st)
            for c in rep.cases:
                if c.status != "passed":
                    print("    ", c.id, c.status, c.message[:300])
    print()
    for (op, bug), what in sorted(BUGS.items()):
        rep = _check(FnBackend(op, NUMPY[op], bug, bug=bug), op)
        failed = [c for c in rep.cases if c.status == "failed"]
        top = sorted(failed, key=lambda c: -c.worst_ratio)[:4]
        ids = ", ".join(f"{c.id.split('/')[1]} ({c.worst_ratio:.2g})" for c in top)
        print(f"{op:22s} {bug:24s} caught by {len(failed):2d}/{len(rep.cases)}: {ids}")
    rep = _check(FnBackend("min_max_scale", mm_np, "alltied", bug="all_tied_full_mass"), "min_max_scale")
    print(f"{'min_max_scale':22s} {'all_tied_full_mass':24s} caught by {rep.count('failed'):2d}/{len(rep.cases)} "
          "(blind spot, documented)")


if __name__ == "__main__":
    main()

