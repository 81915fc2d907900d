"""NumPy emulations of layer_norm / rms_norm kernels that round exactly where told (tests/test_contracts.py).

``run(op, x, w, b, dy, rounds, accs)``: float32 internals (as a Triton kernel: x loaded and widened, the
row sums in float32), the values named in ``rounds`` (point -> dtype, "input" = x's dtype) rounded where
contracts.py's points say, the reductions named in ``accs`` (reduction -> dtype) accumulated in that dtype,
serially, one element at a time (the dweight/dbias partial sums over the rows); the outputs rounded to
x's dtype. Returns (outputs, grads) as NumPy arrays in x's dtype.
"""
from __future__ import annotations

import numpy as np

from refnorm.check.precision import NP, dtype_name

f32 = np.float32


def _rd(a, d):
    """float32 values rounded to dtype ``d`` (one correct rounding), back in float32."""
    return np.asarray(a, dtype=f32).astype(NP[d]).astype(f32)


def _serial(terms, d):
    """The sum over axis 0 of ``terms`` (float32), accumulated serially in dtype ``d``."""
    acc = np.zeros(terms.shape[1:], dtype=NP[d])
    for t in terms:
        acc = (acc.astype(f32) + t).astype(NP[d])          # one rounding to d per addition
    return acc.astype(f32)


def _rowsum(a, serial):
    """Row sums of float32 ``a``: NumPy's pairwise sum, or serial (cumsum: one rounding per addition)."""
    return np.cumsum(a, axis=1, dtype=f32)[:, -1:] if serial else a.sum(axis=1, keepdims=True, dtype=f32)


def _param_grads(tw, DY, w, b, A, dtype):
    """The weight and bias gradients, column sums over rows of ``tw`` (dy * x_hat) and ``DY``, each in the
    float32 accumulator or serially in ``A["dweight"]`` / ``A["dbias"]`` when given; only for the
    parameters present (``w`` / ``b`` not None); cast to ``dtype``."""
    grads = {}
    if w is not None:
        dw = _serial(tw, A["dweight"]) if "dweight" in A else tw.sum(axis=0, dtype=f32)
        grads["weight"] = dw.astype(dtype)
    if b is not None:
        grads["bias"] = (_serial(DY, A["dbias"]) if "dbias" in A else DY.sum(axis=0, dtype=f32)).astype(dtype)
    return grads


def run(op, x, w, b, dy, rounds=None, accs=None, eps=1e-5, X=None, serial=False):
    """(outputs, grads) of the emulated kernel (module docstring); x (m, n), w, b (n,) or None; ``X``: the
    float32 values to normalize in place of x's (add_norm's residual sum); ``serial``: the statistics'
    row sums serial (else NumPy's pairwise sum)."""
    rounds, accs = dict(rounds or {}), dict(accs or {})
    dt = dtype_name(x.dtype)
    D = {k: (dt if v == "input" else v) for k, v in rounds.items()}
    A = {k: (dt if v == "input" else v) for k, v in accs.items()}
    rd = lambda name, a: _rd(a, D[name]) if name in D else a        # noqa: E731
    n = x.shape[1]
    X = x.astype(f32) if X is None else X
    W = np.ones(n, f32) if w is None else w.astype(f32)
    centered = op == "layer_norm"
    with np.errstate(all="ignore"):
        if centered:
            mean = rd("mean", _rowsum(X, serial) / f32(n))
            xc = X - mean
            var = _rowsum(xc * xc, serial) / f32(n)
        else:
            mean = None
            xc = X
            var = _rowsum(X * X, serial) / f32(n)
        rstd = rd("rstd", f32(1) / np.sqrt(var + f32(eps)))
        xh = rd("xhat", xc * rstd)
        yw = rd("xhat_w", xh * W)
        y = yw if b is None else yw + b.astype(f32)
        outs = {"y": y.astype(x.dtype), "rstd": rstd.astype(x.dtype)}
        if centered:
            outs["mean"] = mean.astype(x.dtype)
        if dy is None:
            return outs, {}
        DY = dy.astype(f32)
        g = rd("g", DY * W)
        c1 = (xh * g).sum(axis=1, keepdims=True, dtype=f32) / f32(n)
        c2 = g.sum(axis=1, keepdims=True, dtype=f32) / f32(n) if centered else f32(0)
        if "dx_terms" in D:
            dx = rd("dx_terms", g * rstd) - rd("dx_terms", rd("dx_terms", xh * c1 + c2) * rstd)
        else:
            dx = (g - (xh * c1 + c2)) * rstd
        grads = {"x": dx.astype(x.dtype)}
        tw = rd("dy_xhat", DY * xh)
        grads.update(_param_grads(tw, DY, w, b, A, x.dtype))
    return outs, grads


def draw(rng, m, n, dtype, regime):
    """Inputs (x, w, b, dy) of one case in ``dtype``: regime "normal", "shifted" (|mean|/std ~ 1e3 x
    the 16-bit resolution allows: 30 for 16-bit, 1e3 for float32), "small" (std 1e-3) or "outliers"."""
    d = NP[dtype]
    x = rng.standard_normal((m, n))
    if regime == "shifted":
        x = x + (30.0 if dtype in ("float16", "bfloat16") else 1e3) * rng.choice([-1, 1], (m, 1))
    elif regime == "small":
        x = 1e-3 * x + rng.standard_normal((m, 1))
    elif regime == "outliers":
        x[rng.random(x.shape) < 0.01] *= 50
    w = 1 + 0.5 * rng.standard_normal(n)
    b = 0.1 * rng.standard_normal(n)
    dy = rng.standard_normal((m, n))
    return x.astype(d), w.astype(d), b.astype(d), dy.astype(d)


def run_add_norm(x, res, w, b, dy, dro, rounds=None, accs=None, forward_rounded=True, backward_rounded=True,
                 eps=1e-5):
    """A prenorm residual add + LayerNorm kernel (flash-attention's shape): s = x + res in float32,
    residual_out = s stored in x's dtype; the forward normalizes the rounded s (``forward_rounded``) or the
    float32 one, the backward recomputes x_hat from the stored residual_out (``backward_rounded``) or from
    the float32 s; ds = the norm's dx + d residual_out; dx = dresidual = ds. Returns (outputs, grads)."""
    s = x.astype(f32) + res.astype(f32)
    sr = s.astype(x.dtype).astype(f32)
    outs, _ = run("layer_norm", x, w, b, None, rounds, accs, eps, X=sr if forward_rounded else s)
    _, grads = run("layer_norm", x, w, b, dy, rounds, accs, eps, X=sr if backward_rounded else s)
    dt = dtype_name(x.dtype)                             # the norm's dx kept in float32 (not rounded to dt)
    named = lambda d: {k: (dt if v == "input" else v) for k, v in (d or {}).items()}     # noqa: E731
    _, g32 = run("layer_norm", x.astype(np.float32), w, b, dy, named(rounds), named(accs), eps,
                 X=sr if backward_rounded else s)
    ds = g32["x"] + dro.astype(f32)                      # dx of the norm in float32, plus d residual_out
    grads = {"x": ds.astype(x.dtype), "residual": ds.astype(x.dtype), "weight": grads["weight"],
             "bias": grads["bias"]}
    return {"y": outs["y"], "residual_out": sr.astype(x.dtype)}, grads


def run_norm_quant(x, w, quant_dtype, rounds=None, eps=1e-5):
    """RMSNorm + dynamic per-token quantization (vLLM's shape): y = the emulated rms_norm's x_hat * w before
    its final rounding (``rounds`` as ``run``'s: xhat, xhat_w), amax = max |y|, scale = amax / qmax in
    float32, q = y / scale quantized (saturating, to nearest even). Returns {"q", "scale", "amax"}."""
    from refnorm.norms.norm_quant import QUANT_DTYPES, qmax, quantize
    dt = dtype_name(x.dtype)
    D = {k: (dt if v == "input" else v) for k, v in (rounds or {}).items()}
    rd = lambda name, a: _rd(a, D[name]) if name in D else a        # noqa: E731
    X = x.astype(f32)
    n = x.shape[1]
    rstd = rd("rstd", f32(1) / np.sqrt((X * X).sum(axis=1, keepdims=True, dtype=f32) / f32(n) + f32(eps)))
    y = rd("xhat_w", rd("xhat", X * rstd) * w.astype(f32))
    amax = np.abs(y).max(axis=1, keepdims=True)
    scale = np.maximum(amax / f32(qmax(quant_dtype)), f32(1.0 / (qmax(quant_dtype) * 512.0)))
    _, lo, hi = QUANT_DTYPES[quant_dtype]
    q = quantize(np.clip((y / scale).astype(np.float64), lo, hi), quant_dtype)
    return {"q": q, "scale": scale, "amax": amax}


def _welford(X, chunk):
    """(mean, var) (m, 1) of float32 rows ``X`` as a Welford/merge kernel computes them (torch CPU's
    RowwiseMoments, the CUDA layer_norm kernels): each lane of ``chunk`` consecutive values by serial
    Welford updates, then the lanes merged pairwise (Chan et al.), all in float32."""
    m, n = X.shape
    k = -(-n // chunk)
    cnt, mean, m2 = (np.zeros((m, k), f32) for _ in range(3))
    for t in range(chunk):
        idx = np.arange(k) * chunk + t
        ok = idx < n
        xt = X[:, np.minimum(idx, n - 1)]
        cnt = cnt + ok.astype(f32)
        delta = xt - mean
        mean = np.where(ok, mean + delta / np.maximum(cnt, f32(1)), mean).astype(f32)
        m2 = np.where(ok, m2 + delta * (xt - mean), m2).astype(f32)
    while cnt.shape[1] > 1:
        if cnt.shape[1] % 2:                          # an odd lane out: merged with nothing (count 0)
            cnt, mean, m2 = (np.concatenate([a, np.zeros((m, 1), f32)], axis=1) for a in (cnt, mean, m2))
        na, nb, ma, mb = cnt[:, ::2], cnt[:, 1::2], mean[:, ::2], mean[:, 1::2]
        nn = na + nb
        delta = mb - ma
        frac = np.where(nn > 0, nb / np.maximum(nn, f32(1)), f32(0)).astype(f32)
        mean = (ma + delta * frac).astype(f32)
        m2 = (m2[:, ::2] + m2[:, 1::2] + delta * delta * na * frac).astype(f32)
        cnt = nn
    return mean, m2 / f32(n)


def run_saved(op, x, w, b, dy, *, chunk=8, saved=None, accs=None, rounds=None, eps=1e-5, stats_from=None):
    """(outputs, grads) of a Welford-statistics kernel whose backward forms x_hat per element from its SAVED
    mean and rstd (torch, Apex, the Triton tutorial): the statistics by ``_welford`` in float32, y from
    them in float32; saved as float32, or rounded to ``saved`` ("input" = x's dtype, "float16", ...) and
    returned so; the backward reads exactly the returned values. ``accs``, ``rounds`` as ``run``'s (the
    planted bugs: accs {"dweight": "float16"}, rounds {"rstd": "float16"} (rstd held in float16 in the
    forward and saved so)). ``stats_from``: "float32" makes the backward read the float32 statistics while
    the rounded ones are returned (a kernel whose declaration is false)."""
    rounds, accs = dict(rounds or {}), dict(accs or {})
    dt = dtype_name(x.dtype)
    D = {k: (dt if v == "input" else v) for k, v in rounds.items()}
    A = {k: (dt if v == "input" else v) for k, v in accs.items()}
    sd = None if saved is None else (dt if saved == "input" else saved)
    X = x.astype(f32)
    n = x.shape[1]
    W = np.ones(n, f32) if w is None else w.astype(f32)
    centered = op == "layer_norm"
    with np.errstate(all="ignore"):
        if centered:
            mean, var = _welford(X, chunk)
        else:
            mean, var = np.zeros((x.shape[0], 1), f32), _rowsum(X * X, False) / f32(n)
        rstd = f32(1) / np.sqrt(var + f32(eps))
        if "rstd" in D:
            rstd = _rd(rstd, D["rstd"])
        y = (X - mean) * rstd * W
        y = y if b is None else y + b.astype(f32)
        mean_s, rstd_s = (mean, rstd) if sd is None else (_rd(mean, sd), _rd(rstd, sd))
        keep = NP[sd] if sd is not None else f32
        outs = {"y": y.astype(x.dtype), "rstd": rstd_s.astype(keep)}
        if centered:
            outs["mean"] = mean_s.astype(keep)
        if dy is None:
            return outs, {}
        mu_b, r_b = (mean, rstd) if stats_from == "float32" else (mean_s, rstd_s)
        DY = dy.astype(f32)
        xh = (X - mu_b) * r_b                              # x_hat per element from the saved statistics
        g = DY * W
        c1 = (xh * g).sum(axis=1, keepdims=True, dtype=f32) / f32(n)
        c2 = g.sum(axis=1, keepdims=True, dtype=f32) / f32(n) if centered else f32(0)
        grads = {"x": ((g - (xh * c1 + c2)) * r_b).astype(x.dtype)}
        tw = DY * xh
        grads.update(_param_grads(tw, DY, w, b, A, x.dtype))
    return outs, grads
