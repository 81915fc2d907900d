"""Backward term decompositions: a failing gradient explained by the pieces of its chain-rule formula (issue 33).

For every op with a backward, ``decompose`` writes each gradient array (dx and every parameter gradient)
as the specification computes it, in the pieces a kernel author writes:

* **terms** whose sum, each times the specification's coefficient, IS the reference gradient (tested on
  the golden cases to ~1e-12): a normalization's backward rstd (g - mean(g) - x_hat mean(g x_hat)) as its
  three terms with coefficients (1, -1, -1) (the uncentred norms: (1, 0, -1)); silu'(p) = s + p s (1 - s)
  (s = sigmoid) as its two inner terms (1, 1); tanh'(u) = 1 - t^2 as (1, -1); poly_norm's dx as the terms
  p x^(p-1) r_p g_p and - p x^(p-1) r_p h_p mean(g_p h_p) of each power (coefficients 3, 2, 1); add_norm's
  ds with its dresidual_out term; batch_norm's and instance_norm's eval calls with running statistics
  as dx = g rstd_c;
* **alternatives**, each a whole gradient computed with one discrete deviation: a factor of a product left
  out (replaced by 1: the weight of g = dy * w, the gate silu(z), alpha, tanh', x of d(alpha x)/d alpha),
  a neighbouring tensor substituted (dy for g in one term or all, dy for dy1, x or the unnormalized power
  for x_hat, the gated value x silu(z) for x (or x for it in the backward's recomputed v_hat), silu(z) or
  sigmoid(z) for silu'(z), silu' at the output or at x_hat for at p), a backward's row sums taken over a block of k rows (k = 2, 4, 8, ...) instead of each
  row, or over the whole hidden dimension instead of each group; a channel norm's dx means over a part of
  its slice's axes (batch_norm's per position or per sample); a channel norm's dx in the ds / db form (c2, c3)
  with ds reduced from g x_hat where g x belongs.

``backward_terms`` explains a failing gradient whose forward passes (no output fails): an alternative
that reproduces the backend's array within the check's own bound (``fit_ratio <= 1`` on every element);
else the terms' coefficients fitted by least squares over the failing rows (at least two of them, the
terms linearly independent there), rounded to multiples of 1/2, differing from the specification's and
reproducing every element within the bound; else one term's coefficient changed (dropped, doubled, its
sign flipped, a term the specification leaves out added) when exactly one such change fits; and a
coefficient set found for one gradient is tried on the step's other gradients with the same terms
(add_norm's dx, dresidual, drowscale). Never when the reference itself fits; a scalar gradient only by
an alternative that is the only one that fits. The bound an explained value is held to is the check's,
grown per element by the value's size over the reference's (at most GROWTH x: a gradient with the factor
silu(z) left out is 1/silu(z) times larger, and so is its own rounding error). Mechanisms
(refnorm/pitfalls/mechanisms.py): "backward" (a term or a product), "gate" (the gate's factor silu(z) /
silu'(z) left out or substituted), "block" (the row sums over a block of rows), "group" (over the whole
hidden dimension instead of each group), "affine" (adaptive_layer_norm's 1 of (1 + scale) left out;
group_norm_silu's p recomputed in the backward without its bias: a bias left out is rule 13's before 15),
"dropout" (add_norm's branch scale c on the wrong gradient).

NumPy only; runs on failing cases of at most explain.CONFIG_SIZE elements; never changes a verdict.
"""
from __future__ import annotations

import numpy as np

from ..specs._math import sigmoids

BLOCKS = (2, 4, 8, 16, 32, 64)      # the row blocks a backward's sums may wrongly span
DRO_THROUGH = ("dresidual_out passed through the norm's backward (ds = dnorm(dy + dresidual_out)) where "
               "ds = dnorm(dy) + dresidual_out belongs")
VHAT_X = ("v_hat recomputed in the backward from the loaded x with the saved statistics, the gate's factor "
          "silu(z) of v = x silu(z) left out")
SUM_RTOL = 1e-9                     # the decomposition must reproduce the reference to this (else: not used)


class Grad:
    """One gradient array's decomposition: ``sets`` [(title, [(term, coefficient, array)])], each set's
    sum with its coefficients the specification's gradient; ``alts`` [(text, mechanism, thunk)]."""

    def __init__(self, shape):
        self.shape, self.sets, self.alts = tuple(shape), [], []
        self.scale = None        # (name, per-element array): the slice's statistic every term carries (rstd)

    def scaled_by(self, name, a):
        """The statistic the terms share (``_rescaled``: one term carrying it once more or once less)."""
        self.scale = (name, np.broadcast_to(a, self.shape))
        return self

    def terms(self, title, terms):
        self.sets.append((title, [(n, float(c), np.broadcast_to(a, self.shape)) for n, c, a in terms]))
        return self

    def alt(self, text, mech, fn):
        self.alts.append((text, mech, fn))
        return self


def total(terms):
    """The sum of the terms times their coefficients."""
    return sum(c * a for _, c, a in terms)


# ---------------------------------------------------------------- building blocks (slice view: (rows, n))
def _mean(a):
    return np.broadcast_to(a.mean(axis=1, keepdims=True), a.shape)


def _nb(g, xh, rstd, centred, gm=None, gp=None, mean=_mean):
    """The terms of rstd (g - mean(gm) - x_hat mean(gp x_hat)) (gm, gp: g unless given; mean: per row)."""
    gm = g if gm is None else gm
    gp = g if gp is None else gp
    return [("g", 1.0, rstd * g), ("mean(g)", -1.0 if centred else 0.0, rstd * mean(gm)),
            ("x_hat mean(g x_hat)", -1.0, rstd * xh * mean(gp * xh))]


def _block_mean(k, n, divide_by_block):
    """mean over each block of k consecutive rows (the last may be partial), broadcast to every row of it:
    the block's sum divided by n (a row's count) or by the block's count."""
    def mean(a):
        R = a.shape[0]
        starts = np.arange(0, R, k)
        s = np.add.reduceat(a.sum(axis=1), starts) if R else np.zeros(0)
        cnt = np.minimum(k, R - starts) * n if divide_by_block else n
        return np.broadcast_to(np.repeat(s / cnt, k)[:R, None], a.shape)
    return mean


def _column_mean(k, n):
    """over each block of k consecutive rows (the last may be partial), each column's sum over the block's rows
    divided by n (a row's count), broadcast to every row of it: a tile's sum over its other axis (tl.sum(axis=0)
    where axis=1 belongs)."""
    def mean(a):
        R = a.shape[0]
        pad = np.concatenate([a, np.zeros((-R % k,) + a.shape[1:])]) if R % k else a
        s = pad.reshape((-1, k) + a.shape[1:]).sum(axis=1, keepdims=True) / n
        return np.broadcast_to(s, (s.shape[0], k) + a.shape[1:]).reshape((-1,) + a.shape[1:])[:R]
    return mean


def _nb_alts(grad, to_full, g, dy, xh, rstd, centred, factor, R, n, eps=None):
    """The discrete alternatives of a normalization's backward dx = to_full(rstd (g - ...)): ``factor``
    (what g = dy * factor multiplies, None: g is dy) left out of all terms or one; the two row sums exchanged
    (mean(g) on x_hat's term, mean(g x_hat) alone); the row sums over blocks of k rows; where ``eps`` (inside
    the root) is given, eps left out of one term's rstd (the variance's derivative (var + eps)^(-3/2) written
    var^(-3/2), or the elementwise terms' rstd without it: "eps", rule 1's placement)."""
    if eps:
        with np.errstate(all="ignore"):
            r0 = 1.0 / np.sqrt(np.maximum(1.0 / (rstd * rstd) - eps, 0.0))     # (var)^(-1/2), eps left out
        if np.all(np.isfinite(r0)):
            grad.alt("the x_hat mean(g x_hat) term's factor rstd^3 = (var + eps)^(-3/2) written var^(-3/2) (eps left "
                     "out of the variance's derivative alone)", "eps",
                     lambda: to_full(rstd * (g - _mean(g) * centred) - xh * _mean(g * xh) * rstd * (r0 / rstd) ** 3))
            grad.alt("the elementwise terms' rstd without eps, (g - mean(g)) / sqrt(var) (the x_hat mean(g x_hat) "
                     "term's right)", "eps",
                     lambda: to_full(r0 * (g - _mean(g) * centred) - rstd * xh * _mean(g * xh)))
    if factor is not None:
        grad.alt(f"g = dy: {factor} left out of g", "backward", lambda: to_full(total(_nb(dy, xh, rstd, centred))))
        if centred:
            grad.alt(f"the mean(g) term from dy ({factor} left out of it)", "backward",
                     lambda: to_full(total(_nb(g, xh, rstd, centred, gm=dy))))
        grad.alt(f"the x_hat mean(g x_hat) term from dy ({factor} left out of it)", "backward",
                 lambda: to_full(total(_nb(g, xh, rstd, centred, gp=dy))))
        # the elementwise term from dy, both row sums from g (the weight applied to the sums' operand only)
        grad.alt(f"the elementwise term from dy ({factor} left out of it; the row sums from g)", "backward",
                 lambda: to_full(total(_nb(dy, xh, rstd, centred, gm=g, gp=g))))
    if centred:             # the two row sums held in registers used in each other's term
        grad.alt("the row sums exchanged: rstd (g - x_hat mean(g) - mean(g x_hat))", "backward",
                 lambda: to_full(rstd * (g - xh * _mean(g) - _mean(g * xh))))
    for k in sorted({k for k in BLOCKS if k < R} | {R}) if R > 1 and n > 1 else ():
        tile = "every row" if k == R else f"each block of {k} rows"
        for gm, gp, which in ((True, False, "mean(g)"), (False, True, "mean(g x_hat)"), (True, True, "both row sums")):
            grad.alt(f"{which} of the backward taken as each column's sum over {tile} (a tile's sum over its other "
                     f"axis), divided by n = {n}, where each row's own belongs", "backward",
                     lambda k=k, gm=gm, gp=gp: to_full(rstd * (g - (_column_mean(k, n)(g) if gm else _mean(g)) * centred
                                                          - xh * (_column_mean(k, n)(g * xh) if gp else _mean(g * xh)))))
    for k in BLOCKS:
        if k > R:
            break
        for by_block, how in ((False, f"divided by n = {n}"), (True, "divided by the block's count")):
            grad.alt(f"the row sums of the backward (mean(g), mean(g x_hat)) taken over each block of {k} rows "
                     f"instead of each row ({how})", "block",
                     lambda k=k, b=by_block: to_full(total(_nb(g, xh, rstd, centred, mean=_block_mean(k, n, b)))))


def _axes_alts(grad, case, x, full, g, xh, rstd):
    """dx's means (mean(g), mean(g x_hat)) over a proper subset of the axes a channel norm's slice spans
    (batch_norm: the batch, or the positions, alone; group_norm: a group's channels, or its positions;
    instance_norm: one of several spatial axes), where the whole slice belongs."""
    from itertools import combinations
    if case.op == "group_norm":
        N, C = x.shape[:2]
        G = int(case.config["num_groups"])
        view, red = (N, G, C // G) + x.shape[2:], tuple(range(2, x.ndim + 1))
    elif case.op in ("batch_norm", "instance_norm"):
        view = x.shape
        red = ((0,) if case.op == "batch_norm" else ()) + tuple(range(2, x.ndim))
    else:
        return
    red = tuple(a for a in red if view[a] > 1)
    if len(red) < 2:
        return
    Gv, Xv, Rv = (np.reshape(full(np.broadcast_to(a, g.shape)), view) for a in (g, xh, rstd))
    for k in range(1, len(red)):
        for B in combinations(red, k):
            def fn(B=B):
                m = lambda a: a.mean(axis=B, keepdims=True)              # noqa: E731
                return (Rv * (Gv - m(Gv) - Xv * m(Gv * Xv))).reshape(x.shape)
            # the span of a backward reduction over a part of each slice is rule 10's "group" (before 15), for
            # every channel norm (session 30: batch_norm's per-sample or per-position means too)
            grad.alt(f"dx's means (mean(g), mean(g x_hat)) over the axes {B} of {view} only, where the slice's "
                     f"axes {red} belong", "group", fn)


def x_form(g, xs, mean, rstd, n, ds, at=None, signs=(1, 1)):
    """dx in the ds / db form a channel norm's kernel writes (PyTorch's GroupNorm backward), per slice (rows of
    the (slices, n) view): db = sum(g), c2 = (db mean - ds) rstd^3 / n, c3 = -c2 mean - db rstd / n, dx = rstd
    g + c2 x + c3; with ds = sum(g x) the specification's dx (``at``: the value c2 multiplies, x unless given;
    ``signs``: c3's two terms' signs, each flipped at -1)."""
    db = g.sum(axis=1, keepdims=True)
    c2 = (db * mean - ds) * rstd ** 3 / n
    return rstd * g + c2 * (xs if at is None else at) + (-signs[0] * c2 * mean - signs[1] * db * rstd / n)


def _x_form_alts(grad, full, g, xs, xh, mean, rstd, n):
    """x_form's dx with ds reduced from g x_hat, the normalized value saved by the forward, where g x belongs."""
    def fn():
        return full(x_form(g, xs, mean, rstd, n, (g * xh).sum(axis=1, keepdims=True)))
    grad.alt("the ds / db form (dx = rstd g + c2 x + c3, c2 = (db mean - ds) rstd^3 / n, c3 = -c2 mean - db rstd "
             "/ n) with ds = sum(g x_hat) where sum(g x) belongs", "backward", fn)
    grad.alt("the ds / db form (dx = rstd g + c2 x + c3, c2 = (db mean - ds) rstd^3 / n, c3 = -c2 mean - db rstd "
             "/ n) with c2 multiplying x_hat where x belongs", "backward",
             lambda: full(x_form(g, xs, mean, rstd, n, (g * xs).sum(axis=1, keepdims=True), at=xh)))
    for signs, term in (((-1, 1), "c2 mean"), ((1, -1), "db rstd / n")):
        grad.alt(f"the ds / db form (dx = rstd g + c2 x + c3, c2 = (db mean - ds) rstd^3 / n, c3 = -c2 mean - db rstd "
                 f"/ n) with c3's {term} term's sign flipped", "backward",
                 lambda signs=signs: full(x_form(g, xs, mean, rstd, n, (g * xs).sum(axis=1, keepdims=True), signs=signs)))


def _partials_transposed(g, xh, rstd, shape, n):
    """group_norm's dx (slices (N G, cg S)) with each group's mean(g) and mean(g x_hat) summed from per-(sample,
    channel) partials read at the transposed index (partial (n, c) from the flat slot c N + n)."""
    N, C = shape[:2]
    S = int(np.prod(shape[2:], dtype=np.int64))
    G = g.shape[0] // N
    means = []
    for a in (g, g * xh):
        P = a.reshape(N, C, S).sum(axis=2)                      # (sample, channel) partials, stored n C + c
        idx = np.arange(C)[None, :] * N + np.arange(N)[:, None]
        means.append(P.reshape(-1)[idx].reshape(N, G, C // G).sum(axis=2).reshape(-1, 1) / n)
    return rstd * (g - means[0] - xh * means[1])


def _previous_row(a):
    """``a`` with each row (its last axis' runs) the previous row's, row 0 zeros."""
    r = np.reshape(a, (-1, np.shape(a)[-1]))
    return np.concatenate([np.zeros_like(r[:1]), r[:-1]]).reshape(np.shape(a))


def _lead_sum(a, k):
    """Sum over the leading axes of a (all but the trailing k)."""
    return a.sum(axis=tuple(range(a.ndim - k)))


def _affine_grads(out, w, b, red, dy, g, xh, rstd=None):
    """A normalization's dweight = red(dy x_hat) and dbias = red(dy) into ``out`` (where the op has them), with
    their alternatives: g = dy w where dy belongs; dbias times the slice's ``rstd`` (dweight's factor copied)."""
    if w is not None:
        out["weight"] = _param_grad(w.shape, red, ("dy x_hat", dy * xh),
                                    [("g x_hat where dy x_hat belongs (dy times the weight)", "backward",
                                      lambda: g * xh)])
    if b is not None:
        alts = [("g where dy belongs (dy times the weight)", "backward", lambda: g)]
        if rstd is not None:
            alts.append(("dy rstd where dy belongs (the slice's rstd of dweight's sum copied)", "backward",
                         lambda: dy * rstd))
        out["bias"] = _param_grad(b.shape, red, ("dy", dy), alts)
    return out


def _param_grad(shape, red, prods, alts):
    """A parameter gradient red(product): one term; alternatives red(other product)."""
    name, arr = prods
    grad = Grad(shape).terms(f"sum({name})", [(name, 1.0, red(arr))])
    for text, mech, fn in alts:
        grad.alt(text, mech, (lambda fn=fn: red(fn())))
    return grad


def _stats(ref, xs, eps):
    """(mean, rstd) of each slice (rows, 1): the reference's outputs where it returns one per slice, else
    by the two-pass formula (biased variance, eps inside the root)."""
    m, r = ref.outputs.get("mean"), ref.outputs.get("rstd")
    if m is not None and r is not None and np.size(m) == np.size(r) == xs.shape[0]:
        return _f(m).reshape(-1, 1), _f(r).reshape(-1, 1)
    mean = xs.mean(axis=1, keepdims=True)
    return mean, 1.0 / np.sqrt(((xs - mean) ** 2).mean(axis=1, keepdims=True) + eps)


def _slices(case, x, a):
    """A channel norm's ``a`` (x's shape) as (slices, n): batch_norm's channels, instance_norm's (sample,
    channel) pairs, group_norm's (sample, group) pairs as rows (explain._slices' layout)."""
    a = np.broadcast_to(a, x.shape)
    if case.op == "batch_norm":
        return np.moveaxis(a, 1, 0).reshape(x.shape[1], -1)
    if case.op == "instance_norm":
        return a.reshape(x.shape[0] * x.shape[1], -1)
    return a.reshape(x.shape[0] * int(case.config["num_groups"]), -1)


def _unslices(case, shape, r):
    if case.op == "batch_norm":
        return np.moveaxis(r.reshape((shape[1], shape[0]) + tuple(shape[2:])), 0, 1)
    return r.reshape(shape)


def _label(part, name):
    return "dx" if name == "x" else f"d{name}"


def _f(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


# ---------------------------------------------------------------- the ops
def _row_norm(case, ins, cot, ref):
    """layer_norm / rms_norm ("inside" eps): dx, dweight, dbias."""
    x, dy = ins["x"], cot["y"]
    ns = case.config.get("normalized_shape")
    k = 1 if np.ndim(ns) == 0 else len(ns)
    n = int(np.prod(x.shape[x.ndim - k:], dtype=np.int64))
    R = x.size // max(n, 1)
    centred = case.op == "layer_norm"
    rstd = _f(ref.outputs["rstd"]).reshape(R, 1)
    xs = x.reshape(R, n)
    xh = (xs - (_f(ref.outputs["mean"]).reshape(R, 1) if centred else 0.0)) * rstd
    w = ins.get("weight")
    W = np.ones(n) if w is None else (w + float(case.config.get("weight_offset", 0.0) or 0.0)).reshape(n)
    d = dy.reshape(R, n)
    g = d * W
    out = {}
    full = lambda a: a.reshape(x.shape)                                # noqa: E731
    out["x"] = Grad(x.shape).terms("rstd (g - mean(g) - x_hat mean(g x_hat))", [(t, c, full(a)) for t, c, a in
                                                                              _nb(g, xh, rstd, centred)])
    out["x"].scaled_by("rstd", full(np.broadcast_to(rstd, (R, n))))
    inside = case.config.get("eps_placement", "inside") == "inside"
    _nb_alts(out["x"], full, g, d, xh, rstd, centred, None if w is None else "the weight", R, n,
             float(case.config.get("eps", 0.0) or 0.0) if inside else None)
    red = lambda a: a.sum(axis=0).reshape(np.shape(w) if w is not None else ins["bias"].shape)   # noqa: E731
    out = _affine_grads(out, w, ins.get("bias"), red, d, g, xh, rstd)
    b = ins.get("bias")
    if w is not None and b is not None and np.all(W != 0):
        _from_output(out, full, red, g, d, xh + b.reshape(n) / W, rstd, centred, _bias_kept("y / weight", "the bias"),
                     "affine")
    y = ref.outputs.get("y")
    if y is not None and np.size(y) == x.size:
        m = _f(ref.outputs["mean"]).reshape(R, 1) if centred else 0.0
        _from_output(out, full, red, g, d, (_f(y).reshape(R, n) - m) * rstd, rstd, centred, IN_PLACE, "backward")
    return out


def _from_output(out, full, red, g, dy, xb, rstd, centred, text, mech):
    """x_hat recomputed in the backward as ``xb`` (from the saved output: with the bias never subtracted, x_hat +
    bias / weight, rule 13's "affine" before 15; or from y's buffer taken for x's, (y - mean) rstd: "backward"):
    dx's terms and the gain's gradient from it."""
    out["x"].alt(text, mech, lambda: full(total(_nb(g, xb, rstd, centred))))
    gain = next((k for k in ("weight", "scale") if k in out), None)
    if gain is not None:
        out[gain].alt(text, mech, lambda: red(dy * xb))


def _bias_kept(how, what):
    return f"x_hat recomputed from the output as {how}, {what} never subtracted (x_hat + {what} / gain)"


IN_PLACE = "x_hat recomputed from y's buffer as (y - mean) rstd (the forward written in place over x, the output read " \
           "for the input)"


def _channel_norm(case, ins, cot, ref, running):
    """group_norm, instance_norm, batch_norm: dx, dweight, dbias; with the slices' own statistics, or
    (``running``: an eval call of batch_norm / instance_norm with running statistics) dx = g rstd_c,
    x_hat = (x - running_mean_c) rstd_c, rstd_c = (running_var_c + eps)^(-1/2)."""
    x, dy = ins["x"], cot["y"]
    eps = float(case.config.get("eps", 1e-5))
    cs = (1, -1) + (1,) * (x.ndim - 2)
    w, b = ins.get("weight"), ins.get("bias")
    Wf = np.broadcast_to(1.0 if w is None else w.reshape(cs), x.shape)
    xs = _slices(case, x, x)
    R, n = xs.shape
    d = _slices(case, x, dy)
    g = d * _slices(case, x, Wf)
    full = lambda a: _unslices(case, x.shape, a)                       # noqa: E731
    if running:
        rm, rv = running
        rstd = _slices(case, x, 1.0 / np.sqrt(rv.reshape(cs) + eps))
        xh = (xs - _slices(case, x, rm.reshape(cs))) * rstd
        out = {"x": Grad(x.shape).terms("g rstd", [("g rstd", 1.0, full(g * rstd))])}
        if w is not None:
            out["x"].alt("g = dy: the weight left out of g", "backward", lambda: full(d * rstd))
    else:
        mean, rstd = _stats(ref, xs, eps)
        xh = (xs - mean) * rstd
        out = {"x": Grad(x.shape).terms("rstd (g - mean(g) - x_hat mean(g x_hat))",
                                        [(t, c, full(a)) for t, c, a in _nb(g, xh, rstd, True)])}
        out["x"].scaled_by("rstd", full(np.broadcast_to(rstd, (R, n))))
        _nb_alts(out["x"], full, g, d, xh, rstd, True, None if w is None else "the weight", 0, n)
        out["x"].alt("dx = g rstd (the fixed-statistics formula: both mean terms left out)", "backward",
                     lambda: full(g * rstd))
        if case.op == "group_norm" and x.shape[0] > 1 and x.shape[1] > 1 and x.shape[0] != x.shape[1]:
            out["x"].alt("the per-(sample, channel) partial sums of g and g x_hat stored at n C + c and read back at "
                         "c N + n (a scratch buffer's two index orders)", "layout",
                         lambda: full(_partials_transposed(g, xh, rstd, x.shape, n)))
        _axes_alts(out["x"], case, x, full, g, xh, rstd)
        _x_form_alts(out["x"], full, g, xs, xh, mean, rstd, n)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    red = lambda a: full(a).sum(axis=axes)                             # noqa: E731
    out = _affine_grads(out, w, b, red, d, g, xh, rstd)
    y = ref.outputs.get("y")
    if not running and y is not None and np.shape(y) == x.shape:
        _from_output(out, full, red, g, d, (_slices(case, x, _f(y)) - mean) * rstd, rstd, True, IN_PLACE, "backward")
    if not running and w is not None and b is not None and np.all(np.asarray(w) != 0):
        # x_hat recomputed from the output as y / weight, the bias never subtracted (rule 13: affine)
        Bs = _slices(case, x, np.broadcast_to(b.reshape(cs), x.shape)) / _slices(case, x, Wf)
        _from_output(out, full, red, g, d, xh + Bs, rstd, True, _bias_kept("y / weight", "the bias"), "affine")
    return out


def _group_norm_silu(case, ins, cot, ref):
    """dp = dy silu'(p), then group_norm's backward of dp: dx, dweight, dbias, with silu'(p)'s two terms
    and its alternatives (at y, at x_hat, silu(p), sigmoid(p))."""
    x, dy = ins["x"], cot["y"]
    G = int(case.config["num_groups"])
    eps = float(case.config.get("eps", 1e-5))
    N = x.shape[0]
    xs = x.reshape(N * G, -1)
    R, n = xs.shape
    mean, rstd = _stats(ref, xs, eps)
    xh = ((xs - mean) * rstd).reshape(x.shape)
    cs = (1, -1) + (1,) * (x.ndim - 2)
    w, b = ins.get("weight"), ins.get("bias")
    Wf = np.broadcast_to(1.0 if w is None else w.reshape(cs), x.shape)
    p = xh * Wf + (0.0 if b is None else b.reshape(cs))
    s, rest = sigmoids(p)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    sl = lambda a: np.broadcast_to(a, x.shape).reshape(R, n)           # noqa: E731
    xhs = sl(xh)

    def grads(dp):
        g = sl(dp * Wf)
        return {"x": total(_nb(g, xhs, rstd, True)).reshape(x.shape), "weight": (dp * xh).sum(axis=axes),
                "bias": dp.sum(axis=axes)}
    inner = [("s", 1.0, dy * s), ("p s (1 - s)", 1.0, dy * p * s * rest)]
    parts = [(t, c, grads(a)) for t, c, a in inner]
    y = p * s
    sy, ry = sigmoids(y)
    sx, rx = sigmoids(xh)
    si, ri = sigmoids(x)
    alts = [("silu'(y) at the output y = silu(p) where silu'(p) belongs", dy * sy * (1 + y * ry), "backward"),
            ("silu'(x_hat) at x_hat where silu'(p) belongs (p = x_hat w + b)", dy * sx * (1 + xh * rx), "backward"),
            ("silu'(x) at the op's input x where silu'(p) belongs (p = x_hat w + b)", dy * si * (1 + x * ri),
             "backward"),
            ("silu(p) where silu'(p) belongs", dy * y, "backward"),
            ("dy where dp = dy silu'(p) belongs (the SiLU's derivative left out)", dy, "backward")]
    # the sigmoid alone taken at another value, p kept in silu'(p) = s (1 + p (1 - s)): s(x_hat), s(y), s(x)
    alts += [(f"sigmoid({t}) where sigmoid(p) belongs in silu'(p) = s (1 + p (1 - s)) (p kept)",
              dy * st * (1 + p * (1 - st)), "backward")
             for t, st in (("x_hat", sx), ("y", sy), ("x", si))]
    if b is not None:           # (the backward's recomputed p with its bias left out: rule 13's affine, before 15)
        q = xh * Wf
        sq, rq = sigmoids(q)
        alts.append(("silu' at x_hat w (p recomputed without the bias) where silu'(p) belongs", dy * sq * (1 + q * rq),
                     "affine"))
    dp = dy * s * (1 + p * rest)
    out = {}
    for name in ("x", "weight", "bias"):
        if name != "x" and ins.get(name) is None:
            continue
        shape = x.shape if name == "x" else ins[name].shape
        grad = Grad(shape).terms("dy silu'(p), silu'(p) = s + p s (1 - s), s = sigmoid(p),",
                                 [(f"dy {t}", c, parts_[name]) for t, c, parts_ in parts])
        if name == "x":
            g = sl(dp * Wf)
            grad.terms("rstd (g - mean(g) - x_hat mean(g x_hat)), g = dy silu'(p) w",
                       [(t, c, a.reshape(x.shape)) for t, c, a in _nb(g, xhs, rstd, True)])
            _nb_alts(grad, lambda a: a.reshape(x.shape), g, sl(dp), xhs, rstd, True,
                     None if w is None else "the weight", 0, n)
            gd = sl(dy * Wf)        # a reduction pass reading dy where dp belongs: its sums without silu'(p)
            grad.alt("the group sums (mean(g), mean(g x_hat)) of dy w, the SiLU's derivative left out of them "
                     "(g = dy silu'(p) w in dx's first term)", "backward",
                     lambda g=g, gd=gd: total(_nb(g, xhs, rstd, True, gm=gd, gp=gd)).reshape(x.shape))
            # dp handed to a dx kernel that multiplies by silu'(p) again (both passes written to start from dy)
            grad.alt("dx from dy silu'(p)^2: silu'(p) applied twice (dp = dy silu'(p) multiplied by silu'(p) again)",
                     "backward", lambda: grads(dp * s * (1 + p * rest))["x"])
            # the chain in the wrong order: group_norm's backward of dy w, then multiplied by silu'(p)
            grad.alt("silu'(p) multiplied after group_norm's backward of g = dy w (the chain's order swapped: "
                     "silu'(p) rstd (g - mean(g) - x_hat mean(g x_hat)))", "backward",
                     lambda: grads(dy)["x"] * (s * (1 + p * rest)))
        for text, a, mech in alts:
            grad.alt(text, mech, lambda a=a, name=name: grads(a)[name])
        out[name] = grad
    return out


def _gated_norm(case, ins, cot, ref):
    """gated_norm: dx, dz, dweight, dbias with the gate's factor silu(z) and silu'(z)'s two terms."""
    from ..norms._gated_norm_check import group_size
    x, z, dy = ins["x"], ins["z"], cot["y"]
    H = x.shape[-1]
    K = group_size(H, case.config.get("group_size"))
    nbg = bool(case.config.get("norm_before_gate", False))
    centred = case.config.get("norm", "rms_norm") == "layer_norm"
    eps = float(case.config.get("eps", 1e-5))
    sig, rest = sigmoids(z)
    s, ds = z * sig, sig * (1.0 + z * rest)
    v = x if nbg else x * s
    w, b = ins["weight"], ins.get("bias")

    def stats(Kk):
        vs = v.reshape(-1, Kk)
        m = vs.mean(axis=1, keepdims=True) if centred else 0.0
        r = 1.0 / np.sqrt(((vs - m) ** 2).mean(axis=1, keepdims=True) + eps)
        return (vs - m) * r, r, m
    vh_s, rstd, vmean = stats(K)
    # (norm_before_gate False: the backward's v_hat recomputed from the loaded x, the gate's factor silu(z) of
    # v = x silu(z) left out, with the saved statistics)
    xh_s = None if nbg else (x.reshape(-1, K) - vmean) * rstd
    vh = vh_s.reshape(x.shape)
    nn = vh * w + (0.0 if b is None else b)
    dn = dy * s if nbg else dy
    sl = lambda a, Kk=K: np.broadcast_to(a, x.shape).reshape(-1, Kk)   # noqa: E731
    full = (lambda a: a.reshape(x.shape)) if nbg else (lambda a: a.reshape(x.shape) * s)
    g = sl(dn * w)
    out = {}
    gx = Grad(x.shape).terms("rstd (g - mean(g) - v_hat mean(g v_hat))" + ("" if nbg else " times silu(z)"),
                             [(t, c, full(a)) for t, c, a in _nb(g, vh_s, rstd, centred)])
    _nb_alts(gx, full, g, sl(dn), vh_s, rstd, centred, "the weight", g.shape[0], K)
    dv = total(_nb(g, vh_s, rstd, centred)).reshape(x.shape)
    if nbg:
        gx.alt("dn = dy: the gate's factor silu(z) left out of dn = dy silu(z)", "gate",
               lambda: total(_nb(sl(dy * w), vh_s, rstd, centred)).reshape(x.shape))
        # (the gate-after-norm branch's dx = dv silu(z) taken too: the factor applied twice, dn's and dx's)
        gx.alt("dx = dv silu(z): the gate's factor applied again to dx (dn = dy silu(z) already carries it)", "gate",
               lambda: dv * s)
    else:
        gx.alt("dx = dv: the gate's factor silu(z) of d(x silu(z))/dx left out", "gate", lambda: dv)
        # (the product rule taken as if the gate's input were x: a self-gated silu's derivative)
        gx.alt("dx = dv (silu(z) + x silu'(z)): the gate's derivative in x's gradient as if its input were x", "gate",
               lambda: dv * (s + x * ds))
        gx.alt(VHAT_X, "gate", lambda: full(total(_nb(g, xh_s, rstd, centred))))
    if K != H:
        rH = np.broadcast_to(rstd.reshape(-1, H // K, 1), (rstd.size // (H // K), H // K, K)).reshape(-1, H)
        gx.alt(f"the backward's row sums over the whole hidden dimension ({H}) instead of each group of {K}",
               "group", lambda: full(total(_nb(sl(dn * w, H), vh_s.reshape(-1, H), rH, centred))))
    out["x"] = gx
    A = dy * nn if nbg else dv * x
    what = "dy n" if nbg else "dv x"
    gz = Grad(x.shape).terms(f"{what} silu'(z), silu'(z) = sigmoid(z) + z sigmoid(z) (1 - sigmoid(z))",
                             [(f"{what} sigmoid(z)", 1.0, A * sig), (f"{what} z sigmoid(z) (1 - sigmoid(z))", 1.0,
                                                                     A * z * sig * rest)])
    gz.alt("silu(z) where silu'(z) belongs", "gate", lambda: A * s)
    gz.alt("the gate's derivative silu'(z) left out", "gate", lambda: A)
    if nbg:
        gz.alt("v_hat (the norm without its affine) where n = v_hat w + b belongs", "backward", lambda: dy * vh * ds)
        gz.alt("y = n silu(z) where n belongs", "backward", lambda: dy * nn * s * ds)
        # the raw input: the gate's product taken on the other side of the norm (mechanisms.py's gate)
        gz.alt("x (the input before the norm) where n = v_hat w + b belongs", "gate", lambda: dy * x * ds)
        if b is not None:
            gz.alt("v_hat w (n without the bias) where n = v_hat w + b belongs", "backward", lambda: dy * vh * w * ds)
    else:
        gz.alt("the gated value v = x silu(z) where x belongs", "backward", lambda: dv * v * ds)
        gz.alt(VHAT_X, "gate", lambda: total(_nb(g, xh_s, rstd, centred)).reshape(x.shape) * x * ds)
    out["z"] = gz
    red = lambda a: _lead_sum(a, 1)                                    # noqa: E731
    alts = [("dy where dn = dy silu(z) belongs (the gate's factor left out)", "gate", lambda: dy * vh)] if nbg else []
    if not nbg:
        alts.append((VHAT_X, "gate", lambda: dn * xh_s.reshape(x.shape)))
    out["weight"] = _param_grad(w.shape, red, ("dn v_hat", dn * vh), alts + [
        ("v (not normalized) where v_hat belongs", "backward", lambda: dn * v)])
    if b is not None:
        out["bias"] = _param_grad(b.shape, red, ("dn", dn), [("dy where dn = dy silu(z) belongs (the gate's "
                                                             "factor left out)", "gate", lambda: dy)] if nbg else [])
    return out


def _dyt(case, ins, cot, ref):
    """dyt: dx = dy w tanh'(a x) a, dalpha = sum(dy w tanh'(a x) x), tanh' = 1 - t^2; each factor left out."""
    x, dy = ins["x"], cot["y"]
    a = float(np.reshape(ins["alpha"], ()))
    t = np.tanh(a * x)
    w, b = ins.get("weight"), ins.get("bias")
    W = 1.0 if w is None else w
    t2 = t * t
    out = {}
    gx = Grad(x.shape).terms("dy w (1 - t^2) alpha, t = tanh(alpha x)", [("dy w alpha", 1.0, dy * W * a),
                                                                         ("dy w alpha t^2", -1.0, dy * W * a * t2)])
    D = 1.0 - t2
    facs = {"alpha": (dy * W * D, "alpha"), "tanh'": (dy * W * a, "tanh'(alpha x)")}
    if w is not None:
        facs["w"] = (dy * D * a, "the weight")
    for _, (arr, what) in facs.items():
        gx.alt(f"{what} left out", "backward", lambda arr=arr: arr)
    gx.alt("t = tanh(alpha x) where tanh'(alpha x) belongs", "backward", lambda: dy * W * t * a)
    # g (1 - t^2) written without its parentheses, g * 1 - t * t (the t^2 term without its factor g)
    gx.alt("g (1 - t^2) written g * 1 - t * t (the parentheses missing)", "backward",
           lambda: (dy * W - t2) * a)
    y = t * W + (0.0 if b is None else b)
    if w is not None or b is not None:
        gx.alt("tanh' as 1 - y^2 from the output y = w t + b where 1 - t^2 belongs", "backward",
               lambda: dy * W * (1.0 - y * y) * a)
    out["x"] = gx
    ash = np.shape(ins["alpha"])
    tot = lambda arr: np.reshape(np.sum(arr), ash)                     # noqa: E731
    ga = Grad(ash).terms("sum(dy w (1 - t^2) x)", [("dy w x", 1.0, tot(dy * W * x)), ("dy w x t^2", -1.0,
                                                                                      tot(dy * W * x * t2))])
    alts = [("x of d(alpha x)/d alpha left out", dy * W * D), ("tanh'(alpha x) left out", dy * W * x),
            ("alpha times (dx's product summed)", dy * W * D * x * a), ("t = tanh(alpha x) where tanh'(alpha x) "
                                                                       "belongs", dy * W * t * x)]
    if w is not None:
        alts.append(("the weight left out (g = dy)", dy * D * x))
        alts.append(("the weight applied twice (g = dy w times w again)", dy * W * W * D * x))
    if w is not None or b is not None:
        alts.append(("tanh' as 1 - y^2 from the output y = w t + b where 1 - t^2 belongs", dy * W * (1.0 - y * y) * x))
    alts.append(("g (1 - t^2) written g * 1 - t * t (the parentheses missing)", (dy * W - t2) * x))
    for text, arr in alts:
        ga.alt(text, "backward", lambda arr=arr: tot(arr))
    out["alpha"] = ga
    red = lambda arr: _lead_sum(arr, 1)                                # noqa: E731
    if w is not None:
        out["weight"] = _param_grad(w.shape, red, ("dy t", dy * t), [
            ("x where t = tanh(alpha x) belongs", "backward", lambda: dy * x),
            ("alpha x where t = tanh(alpha x) belongs", "backward", lambda: dy * a * x),
            ("dy w t where dy t belongs (times the weight)", "backward", lambda: dy * W * t),
            ("t of the previous row (a loop-carried register read before the row's load; row 0 by 0)", "layout",
             lambda: dy * _previous_row(t))])
    if b is not None:
        out["bias"] = _param_grad(b.shape, red, ("dy", dy), [("dy w where dy belongs (times the weight)",
                                                              "backward", lambda: dy * W)] if w is not None else [])
    return out


def _poly_norm(case, ins, cot, ref):
    """poly_norm: dx's six terms (per power p: p x^(p-1) r_p g_p and - p x^(p-1) r_p h_p mean(g_p h_p)),
    dweight's sums of dy h_p, dbias."""
    x, dy = ins["x"], cot["y"]
    eps = float(case.config.get("eps", 1e-6))
    w, b = ins["weight"], ins.get("bias")

    us = [x ** p for p in (3, 2, 1)]                                        # the powers and their rstd r_p
    rs = [1.0 / np.sqrt((u * u).mean(axis=-1, keepdims=True) + eps) for u in us]

    def parts(ws, whole=False, tile=None):
        terms = []
        for k, p in enumerate((3, 2, 1)):
            r = rs[k]
            h = us[k] * r
            gp = dy * ws[k]
            B = np.broadcast_to(np.mean(gp * h), r.shape) if whole else (gp * h).mean(axis=-1, keepdims=True) \
                if tile is None else _block_mean(tile, x.shape[-1], False)(_rows(gp * h)).reshape(
                    x.shape[:-1] + (-1,))[..., :1]
            xp = x ** (p - 1)
            terms += [(f"x^{p - 1} r_{p} g_{p}", float(p), xp * r * gp), (f"x^{p - 1} r_{p} h_{p} mean(g_{p} h_{p})",
                                                                          -float(p), xp * r * h * B)]
        return terms
    out = {}
    gx = Grad(x.shape).terms("sum over p of p x^(p-1) r_p (g_p - h_p mean(g_p h_p))", parts(w))
    gx.alt("the factors p of d(x^p)/dx left out: dx = x^2 du_3 + x du_2 + du_1", "backward",
           lambda: sum(c / abs(c) * a for _, c, a in parts(w)))
    gx.alt("d(x^p)/dx written (p - 1) x^(p - 1) (the exponent's decrement applied to its factor too): dx = 2 x^2 du_3 "
           "+ x du_2 + 0 du_1", "backward",
           lambda: sum((abs(c) - 1.0) / abs(c) * a for _, c, a in parts(w)))
    gx.alt("the weights in reversed order (weight[0] on x, weight[2] on x^3) in the backward", "affine",
           lambda: total(parts(w[::-1])))
    gx.alt("g_p = dy: the weights left out of the backward", "backward", lambda: total(parts(np.ones(3))))
    if x.size > x.shape[-1]:    # a reduction without its axis over a tile holding every row: rule 11
        gx.alt("each power's mean(g_p h_p) over the whole tensor (every row) where each row's belongs", "reduction",
               lambda: total(parts(w, whole=True)))
        for t in (2, 4):        # (a tile of t rows reduced without an axis, divided by a row's count: rule 9)
            gx.alt(f"each power's mean(g_p h_p) over each tile of {t} rows (their sum divided by a row's length) where "
                   "each row's belongs", "block", lambda t=t: total(parts(w, tile=t)))

    def centred():          # each power's normalization gradient by the layer norm's formula: - mean(g_p) too
        return total(parts(w)) - sum(p * x ** (p - 1) * r * (dy * w[k]).mean(axis=-1, keepdims=True)
                                     for k, (p, r) in enumerate(zip((3, 2, 1), rs)))
    gx.alt("each power's gradient by a centred norm's formula: r_p (g_p - mean(g_p) - h_p mean(g_p h_p))",
           "backward", centred)
    out["x"] = gx
    hs = [(x ** p) / np.sqrt(((x ** p) ** 2).mean(axis=-1, keepdims=True) + eps) for p in (3, 2, 1)]
    gw = Grad(w.shape).terms("(sum(dy h_3), sum(dy h_2), sum(dy h_1))",
                             [(f"sum(dy h_{p})", 1.0, np.eye(3)[k] * np.sum(dy * hs[k]))
                              for k, p in enumerate((3, 2, 1))])
    gw.alt("x^p (the power before its normalization) where h_p belongs", "backward",
           lambda: np.array([np.sum(dy * x ** p) for p in (3, 2, 1)]))
    gw.alt("the powers in reversed order (dweight[0] from h_1)", "backward",
           lambda: np.array([np.sum(dy * h) for h in hs[::-1]]))
    gw.alt("dy w_k h_p where dy h_p belongs (times the weight)", "backward",
           lambda: np.array([np.sum(dy * w[k] * hs[k]) for k in range(3)]))
    out["weight"] = gw
    if b is not None:
        gb = Grad(b.shape).terms("sum(dy)", [("sum(dy)", 1.0, np.reshape(np.sum(dy), b.shape))])
        for k, p in enumerate((3, 2, 1)):   # (a parameter gradient's product reused for another's)
            gb.alt(f"sum(dy h_{p}) (dweight[{k}]'s product) where sum(dy) belongs", "backward",
                   lambda h=hs[k]: np.reshape(np.sum(dy * h), b.shape))
        out["bias"] = gb
    return out


def _adaptive_layer_norm(case, ins, cot, ref):
    """adaptive_layer_norm: dx with g = dy (1 + scale), dscale, dshift."""
    x, dy = ins["x"], cot["y"]
    eps = float(case.config.get("eps", 1e-6))
    H = x.shape[-1]
    R = x.size // max(H, 1)
    xs = x.reshape(R, H)
    mean, rstd = _stats(ref, xs, eps)
    xh = (xs - mean) * rstd
    scale, shift = ins.get("scale"), ins.get("shift")
    ps = lambda v: v.reshape((v.shape[0],) + (1,) * (x.ndim - 2) + (H,))   # noqa: E731
    gain = np.broadcast_to(1.0 if scale is None else 1.0 + ps(scale), x.shape).reshape(R, H)
    d = dy.reshape(R, H)
    g = d * gain
    full = lambda a: a.reshape(x.shape)                                # noqa: E731
    gx = Grad(x.shape).terms("rstd (g - mean(g) - x_hat mean(g x_hat)), g = dy (1 + scale)",
                             [(t, c, full(a)) for t, c, a in _nb(g, xh, rstd, True)])
    T = R // max(x.shape[0], 1)
    if T > 1:                   # the row sums over a sample's T tokens (the op's axes and more: rule 11)
        for by, how in ((True, f"divided by T H = {T * H}"), (False, f"divided by H = {H}")):
            gx.alt(f"the row sums (mean(g), mean(g x_hat)) over each sample's {T} tokens instead of each token's "
                   f"({how})", "reduction",
                   lambda by=by: full(total(_nb(g, xh, rstd, True, mean=_block_mean(T, H, by)))))
    _nb_alts(gx, full, g, d, xh, rstd, True, None if scale is None else "(1 + scale)", R, H, eps)
    if scale is not None:
        gx.alt("g = dy scale: the 1 of (1 + scale) left out", "affine",
               lambda: full(total(_nb(d * (gain - 1.0), xh, rstd, True))))
    out = {"x": gx}
    tokens = tuple(range(1, x.ndim - 1))
    red = lambda a: full(a).sum(axis=tokens)                           # noqa: E731
    if scale is not None:
        out["scale"] = _param_grad(scale.shape, red, ("dy x_hat", d * xh), [
            ("g x_hat where dy x_hat belongs (dy times (1 + scale))", "backward", lambda: g * xh),
            ("x where x_hat belongs", "backward", lambda: d * xs)])
    if shift is not None:
        out["shift"] = _param_grad(shift.shape, red, ("dy", d), [
            ("g where dy belongs (dy times (1 + scale))", "backward", lambda: g)] if scale is not None else [])
        if np.all(gain != 0):
            _from_output(out, full, red, g, d, xh + np.broadcast_to(ps(shift), x.shape).reshape(R, H) / gain, rstd,
                         True, _bias_kept("y / (1 + scale)" if scale is not None else "y", "the shift"), "affine")
    return out


def _add_norm(case, ins, cot, ref):
    """add_norm: ds = the norm's backward of dy (weight) and dy1 (weight1) + dresidual_out; dx = ds c,
    dresidual = ds, dx1 = ds c1; drowscale = sum_A(ds x mask) / (1 - p); dweight, dbias, dweight1, dbias1
    (dmask, dmask1: zeros, not decomposed)."""
    from .backends.base import complete_config
    from ..specs.add_norm import branch_scale
    cfg = complete_config(case.op, case.config)
    x = ins["x"]
    ns = cfg["normalized_shape"]
    k = 1 if np.ndim(ns) == 0 else len(ns)
    n = int(np.prod(x.shape[x.ndim - k:], dtype=np.int64))
    R = x.size // max(n, 1)
    p = float(cfg.get("dropout_p", 0.0) or 0.0)
    off = float(cfg.get("weight_offset", 0.0) or 0.0)
    centred = cfg["norm"] == "layer_norm"
    c = branch_scale(x, ins.get("mask"), ins.get("rowscale"), p, k)
    x1 = ins.get("x1")
    c1 = None if x1 is None else branch_scale(x1, ins.get("mask1"), None, p, k)
    s = x if c is None else x * c
    if x1 is not None:
        s = s + (x1 if c1 is None else x1 * c1)
    if ins.get("residual") is not None:
        s = s + ins["residual"]
    ss = s.reshape(R, n)
    m = ss.mean(axis=1, keepdims=True) if centred else 0.0
    rstd = 1.0 / np.sqrt(((ss - m) ** 2).mean(axis=1, keepdims=True) + float(cfg["eps"]))
    xh = (ss - m) * rstd
    w, w1 = ins.get("weight"), ins.get("weight1")
    W = 1.0 if w is None else (w + off).reshape(n)
    d = cot["y"].reshape(R, n)
    d1 = None if w1 is None or cot.get("y1") is None else cot["y1"].reshape(R, n)
    g = d * W + (0.0 if d1 is None else d1 * (w1 + off).reshape(n))
    dro = cot.get("residual_out") if cfg.get("prenorm") else None
    ds_terms = [(t, c_, a.reshape(x.shape)) for t, c_, a in _nb(g, xh, rstd, centred)]
    if dro is not None:
        ds_terms.append(("dresidual_out", 1.0, np.asarray(dro, dtype=np.float64)))
    ds = total(ds_terms)
    title = "ds = rstd (g - mean(g) - x_hat mean(g x_hat)) + dresidual_out"
    full = lambda a: a.reshape(x.shape) + (0.0 if dro is None else dro)   # noqa: E731
    dropout = "dropout"             # c: the keep-mask, rowscale (drop-path) and 1 / (1 - p)
    out = {}
    for name, fac in (("x", c), ("residual", None), ("x1", c1)):
        if name != "x" and ins.get(name) is None:
            continue
        mul = (lambda a: a) if fac is None else (lambda a, f=fac: a * f)
        grad = Grad(x.shape).terms(title + ("" if fac is None else " times c"),
                                   [(t, c_, mul(a)) for t, c_, a in ds_terms])
        _nb_alts(grad, lambda a, mul=mul: mul(full(a)), g, d, xh, rstd, centred,
                 None if w is None or d1 is not None else "the weight", R, n)
        if d1 is not None:
            grad.alt("y1's cotangent dy1 left out of ds", "backward", lambda mul=mul: mul(full(total(
                _nb(d * W, xh, rstd, centred)))))
        if dro is not None:         # residual_out's cotangent added to dy before the norm's backward, not after it
            dro_r = np.asarray(dro, dtype=np.float64).reshape(R, n)
            grad.alt(DRO_THROUGH, "backward",
                     lambda mul=mul, dro_r=dro_r: mul(total(_nb(g + dro_r * W, xh, rstd, centred)).reshape(x.shape)))
        if fac is not None:
            grad.alt(f"the branch's scale c left out (d{name} = ds)", dropout, lambda: ds)
            if p:
                grad.alt(f"the 1 / (1 - p) of the branch's scale c left out (d{name} = ds c (1 - p))", dropout,
                         lambda fac=fac: ds * fac * (1.0 - p))
        elif name == "residual" and c is not None:
            grad.alt("dresidual = ds c: the branch's scale applied to the residual's gradient", dropout,
                     lambda: ds * c)
        out[name] = grad
    if ins.get("rowscale") is not None:
        mx = x if ins.get("mask") is None else x * ins["mask"]
        rs = lambda a: (a * mx).reshape(R, n).sum(axis=1).reshape(ins["rowscale"].shape) / (1.0 - p)  # noqa: E731
        out["rowscale"] = Grad(ins["rowscale"].shape).terms("sum_A(ds x mask) / (1 - p)",
                                                             [(t, c_, rs(a)) for t, c_, a in ds_terms])
        if dro is not None:
            dro_r = np.asarray(dro, dtype=np.float64).reshape(R, n)
            out["rowscale"].alt(DRO_THROUGH, "backward",
                                lambda: rs(total(_nb(g + dro_r * W, xh, rstd, centred)).reshape(x.shape)))
    red = lambda a: a.sum(axis=0).reshape(ns if np.ndim(ns) else (n,))    # noqa: E731
    for pname, dd, other, oname in (("weight", d, d1, "dy1"), ("bias", d, d1, "dy1"), ("weight1", d1, d, "dy"),
                                    ("bias1", d1, d, "dy")):
        if ins.get(pname) is None or dd is None:
            continue
        mine = "dy" if pname in ("weight", "bias") else "dy1"
        prod = (f"{mine} x_hat", dd * xh) if pname.startswith("weight") else (mine, dd)
        alts = []
        if other is not None:
            alt = other * xh if pname.startswith("weight") else other
            alts.append((f"{oname} where {mine} belongs (the other output's cotangent)", "backward",
                         lambda alt=alt: alt))
        out[pname] = _param_grad(np.shape(ins[pname]), red, prod, alts)
    return out


def _z_score(case, ins, cot, ref):
    """z_score: dx = (g - mean_A(g) - x_hat sum_A(g x_hat) / (n - ddof)) / std, dweight, dbias (x_hat and std
    the reference's: a slice of std 0 has dx 0 there and leaves the decomposition unused)."""
    from .backends.base import complete_config
    x, dy = ins["x"], cot["y"]
    cfg = complete_config(case.op, case.config)                       # (ddof's default, 1)
    dim = cfg["dim"]
    A = tuple(range(x.ndim)) if dim is None else \
        tuple(sorted({a % x.ndim for a in (dim if isinstance(dim, (list, tuple)) else (dim,))}))
    P = [s if i in A else 1 for i, s in enumerate(x.shape)]
    other = tuple(i for i in range(x.ndim) if i not in A)
    m = int(np.prod([x.shape[a] for a in A])) - int(cfg["ddof"])
    std = _f(ref.outputs["std"])
    xh = (x - _f(ref.outputs["mean"])) / std
    w, b = ins.get("weight"), ins.get("bias")
    g = dy if w is None else dy * w.reshape(P)
    if m <= 0:
        return {}
    mean = lambda a: np.broadcast_to(a.mean(axis=A, keepdims=True), x.shape)     # noqa: E731
    out = {"x": Grad(x.shape).terms(f"(g - mean(g) - x_hat sum(g x_hat) / {m}) / std", [
        ("g", 1.0, g / std), ("mean(g)", -1.0, mean(g) / std),
        (f"x_hat sum(g x_hat) / {m}", -1.0, xh * (g * xh).sum(axis=A, keepdims=True) / m / std)])}
    out["x"].scaled_by("1 / std", 1.0 / std)
    if w is not None:
        out["x"].alt("g = dy: the weight left out of g", "backward",
                     lambda: (dy - mean(dy) - xh * (dy * xh).sum(axis=A, keepdims=True) / m) / std)
    red = lambda a: np.asarray(a).sum(axis=other).reshape([x.shape[i] for i in A])   # noqa: E731
    return _affine_grads(out, w, b, red, dy, g, xh)


OPS = {"layer_norm": _row_norm, "z_score": _z_score, "rms_norm": _row_norm, "group_norm": None, "instance_norm": None,
       "batch_norm": None, "group_norm_silu": _group_norm_silu, "gated_norm": _gated_norm, "dyt": _dyt,
       "poly_norm": _poly_norm, "adaptive_layer_norm": _adaptive_layer_norm, "add_norm": _add_norm}


def decompose(case, inputs, cotangents, training, ref, state=None) -> dict:
    """{gradient name: Grad} for the op's gradients (float64), or {} where the op has none here. Each Grad
    set's terms sum to the specification's gradient (``backward_terms`` uses a set only where they do).
    ``state``: the call's running statistics (batch_norm / instance_norm eval calls normalize with them)."""
    if case.op not in OPS or "y" not in cotangents or inputs.get("x") is None:
        return {}
    ins = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items() if v is not None
           and np.asarray(v).dtype.kind not in "iuSUO"}
    cot = {k: np.asarray(v, dtype=np.float64) for k, v in cotangents.items() if v is not None}
    fn = OPS[case.op]
    with np.errstate(all="ignore"):
        if fn is None:
            st = state or {}
            running = None if training or case.op == "group_norm" or st.get("running_mean") is None \
                or st.get("running_var") is None else (_f(st["running_mean"]), _f(st["running_var"]))
            return _channel_norm(case, ins, cot, ref, running)
        return fn(case, ins, cot, ref)


# ---------------------------------------------------------------- the search
def _rows(a):
    a = np.asarray(a)
    return a.reshape(-1, a.shape[-1]) if a.ndim >= 2 else a.reshape(-1, 1)


def _agrees(terms, want) -> bool:
    want = np.asarray(want, dtype=np.float64)
    v = total(terms)
    if np.shape(v) != np.shape(want) or not np.all(np.isfinite(v)) or not np.all(np.isfinite(want)):
        return False
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return bool(np.max(np.abs(v - want), initial=0.0) <= SUM_RTOL * max(scale, 1e-300))


def _coef_text(label, title, terms, near, fitted=None):
    """The explanation of the coefficients ``near`` (differing from the specification's)."""
    spec = [c for _, c, _ in terms]
    what = []
    for (name, sc, _), c in zip(terms, near):
        if c == sc:
            continue
        what.append(f"the {name} term " + ("missing" if c == 0 else "counted twice" if c == 2 * sc
                                           else "with its sign flipped" if c == -sc else
                                           f"with coefficient {c:g} where {sc:g} belongs"))
    coefs = "fitted coefficients " + ", ".join(f"{c:.2f}" for c in fitted) if fitted is not None else \
        "coefficients " + ", ".join(f"{c:g}" for c in near)
    out = {"mechanism": "backward", "text": f"{label} matches the formula {title} with {'; '.join(what)}: "
                                            f"{coefs} (the specification's {', '.join(f'{c:g}' for c in spec)})",
           "coefficients": (tuple(n for n, _, _ in terms), tuple(float(c) for c in near))}
    means = [(c, sc) for (name, sc, _), c in zip(terms, near) if name.startswith(("mean", "x_hat mean")) and sc]
    k = means[0][0] / means[0][1] if means else None
    if len(means) > 1 and k > 0 and k != 1 and all(c == k * sc for c, sc in means) \
            and all(c == sc for (name, sc, _), c in zip(terms, near) if not name.startswith(("mean", "x_hat mean"))):
        # every row mean k times its value: their sums divided by n / k, a count (rule 11; rule 10 for one
        # channel's count where a group's belongs, decided by the caller, which knows the case)
        out.update(mechanism="reduction", count_factor=float(k),
                   text=f"{label} matches the formula {title} with its means' sums divided by n / {k:g} where n "
                        f"belongs (every mean term {k:g} times its value): {coefs}")
    return out


def _lstsq(label, title, terms, got, want, E, fit_ratio):
    """Coefficients fitted over the failing rows, rounded to multiples of 1/2: the explanation when they
    differ from the specification's and reproduce every element within the bound, else None."""
    from .localize import failing_mask
    spec = np.array([c for _, c, _ in terms])
    if len(terms) < 2:
        return None
    bad = _rows(failing_mask(got, want, E))
    rows = np.any(bad, axis=1) if np.ndim(got) >= 2 else np.ones(bad.shape[0], bool)
    gd = _rows(np.asarray(got, dtype=np.float64))
    cols = [_rows(a)[rows].ravel() for _, _, a in terms]
    b = gd[rows].ravel()
    ok = np.isfinite(b) & np.all([np.isfinite(c) for c in cols], axis=0)
    if np.ndim(got) >= 2 and rows.sum() < 2 or ok.sum() < 2 * len(terms):
        return None
    A = np.stack([c[ok] for c in cols], axis=1)
    sv = np.linalg.svd(A, compute_uv=False)
    if not sv[0] > 0 or sv[-1] < 1e-8 * sv[0]:                      # the terms are not independent here
        return None
    coef, *_ = np.linalg.lstsq(A, b[ok], rcond=None)
    near = np.round(coef * 2) / 2
    if np.any(np.abs(coef - near) > 0.05 * np.maximum(1.0, np.abs(near))) or np.all(near == spec):
        return None
    if fit_ratio(got, sum(c * a for c, (_, _, a) in zip(near, terms)), E) > 1:
        return None
    return _coef_text(label, title, terms, near, coef)


def _single(label, title, terms, got, E, fit_ratio):
    """One term's coefficient changed (dropped, doubled, its sign flipped; a term the specification leaves
    out (0) added with +-1): the explanation when exactly one such change reproduces every element."""
    spec = [c for _, c, _ in terms]
    fits = []
    for i, sc in enumerate(spec):
        for c in ((0.0, 2 * sc, -sc) if sc else (1.0, -1.0)):
            near = list(spec)
            near[i] = c
            if fit_ratio(got, sum(k * a for k, (_, _, a) in zip(near, terms)), E) <= 1:
                fits.append(near)
    return _coef_text(label, title, terms, fits[0]) if len(fits) == 1 else None


def _rescaled(label, grad, got, E, fit_ratio):
    """One term, or all but one, carrying the slice's statistic (``grad.scale``: rstd, 1 / std) once more or once
    less (the derivative of a std written through x_hat / std where (x - mean) / std belongs; rstd^2 for rstd; a
    parenthesis closed after the first term, rstd g - mean(g) - x_hat mean(g x_hat)): the explanation when exactly
    one such change of one set reproduces every element, else None."""
    from itertools import combinations
    if grad.scale is None:
        return None
    sname, sa = grad.scale
    fits = []
    for title, terms in grad.sets:
        live = [i for i, (_, c, _) in enumerate(terms) if c]
        for k in range(1, max(len(live) - 1, 1) + 1):
            for idx in combinations(live, k):
                for power, how in ((1, "once more"), (-1, "once less")):
                    v = total(terms) + sum(terms[i][1] * terms[i][2] for i in idx) * (sa ** power - 1.0)
                    if fit_ratio(got, v, E) <= 1:
                        fits.append((title, " and ".join(terms[i][0] for i in idx), k, power, how))
    if len(fits) != 1:
        return None
    title, name, k, power, how = fits[0]
    return {"mechanism": "backward", "text": f"{label} matches the formula {title} with the {name} "
                                             f"term{'s' if k > 1 else ''} multiplied by {sname} {how}"}


def _carried(label, grad, got, E, fit_ratio, found):
    """A coefficient set that explained another gradient of the step (``found``: term names -> coefficients)
    applied to this one's terms of the same names: the explanation when it fits, else None."""
    for title, terms in grad.sets:
        near = found.get(tuple(n for n, _, _ in terms))
        if near is not None and fit_ratio(got, sum(c * a for c, (_, _, a) in zip(near, terms)), E) <= 1:
            return _coef_text(label, title, terms, near)
    return None


SAMPLE = 4096        # scaled(): the elements tried before the whole array
GROWTH = 1e4         # the most an explained value's bound grows over the reference's (``scaled``)


def scaled(fit_ratio, want):
    """fit_ratio with the bound scaled by how much larger the explained value v is than the reference
    (|v| / |want| per element, between 1 and GROWTH; |want| floored at 1e-4 of its largest value): a value
    computed with a factor left out (dv where dv silu(z) belongs) carries that factor's rounding error."""
    want = np.abs(np.asarray(want, dtype=np.float64))
    floor = 1e-4 * float(np.max(want, initial=0.0))

    def fr(got, v, E):
        v = np.broadcast_to(np.asarray(v, dtype=np.float64), want.shape)
        with np.errstate(all="ignore"):
            f = np.clip(np.abs(v) / np.maximum(want, floor), 1.0, GROWTH)
        Ef = np.broadcast_to(E, want.shape) * np.where(np.isfinite(f), f, 1.0)
        if want.size > 2 * SAMPLE:            # a strided sample first: beyond the bound there is beyond it here
            step = want.size // SAMPLE
            r = fit_ratio(np.ravel(got)[::step], v.ravel()[::step], Ef.ravel()[::step])
            if r > 1:
                return r
        return fit_ratio(got, v, Ef)
    return fr


def _channels_per_group(case, x):
    """A grouped channel norm's channels per group (C / G), or None."""
    G = case.config.get("num_groups")
    if case.op not in ("group_norm", "group_norm_silu") or np.ndim(x) < 2 or not isinstance(G, int) or G < 1:
        return None
    return float(np.shape(x)[1] // G)


def explain_grad(label, grad, got, want, E, fit_ratio):
    """The explanation of one failing gradient by its decomposition (module docstring), or None."""
    if fit_ratio(got, want, E) <= 1:
        return None
    fit_ratio = scaled(fit_ratio, want)
    fits = []
    for text, mech, fn in grad.alts:
        try:
            with np.errstate(all="ignore"):
                v = fn()
        except (ValueError, IndexError, ZeroDivisionError):   # an alternative this shape does not admit
            continue
        if np.shape(v) == np.shape(got) and fit_ratio(got, v, E) <= 1:
            fits.append({"mechanism": mech, "text": f"{label} matches the formula with {text}"})
            if np.size(got) >= 2:
                break
    if np.size(got) < 2:                     # a scalar: only an alternative that alone fits
        return fits[0] if len(fits) == 1 else None
    if fits:
        return fits[0]
    for title, terms in grad.sets:
        e = _lstsq(label, title, terms, got, want, E, fit_ratio) or _single(label, title, terms, got, E, fit_ratio)
        if e is not None:
            return e
    return _rescaled(label, grad, got, E, fit_ratio) or _tail_alt(label, grad, got, want, E, fit_ratio)


TAIL_VECTORS = (2, 4, 8, 16, 32, 64)     # the vector widths whose scalar remainder loop may compute otherwise


def _tail_alt(label, grad, got, want, E, fit_ratio):
    """A vector body right and its scalar remainder loop written with another formula: the gradient the
    specification's except at the last L mod V positions of each run of L values (L a product of trailing axes,
    V a vector width), where one alternative's values reproduce it (the fewest such positions first); or None."""
    shape = np.shape(got)
    if len(shape) < 1 or np.size(got) < 8:
        return None
    vals = []
    for text, mech, fn in grad.alts:
        try:
            with np.errstate(all="ignore"):
                v = fn()
        except (ValueError, IndexError, ZeroDivisionError):
            continue
        if np.shape(v) == shape:
            vals.append((text, mech, np.asarray(v, dtype=np.float64)))
    masks = []
    for k in range(1, len(shape)):
        L = int(np.prod(shape[k:], dtype=np.int64))
        col = np.broadcast_to(np.arange(L), (np.size(got) // L, L)).reshape(shape)
        masks += [((L % V) * (np.size(got) // L), col >= L - L % V, L, V) for V in TAIL_VECTORS if L > V and L % V]
    for _, mask, L, V in sorted(masks, key=lambda m: m[0]):
        for text, mech, v in vals:
            if np.allclose(v[mask], np.asarray(want, dtype=np.float64)[mask], rtol=1e-12, atol=0):
                continue
            with np.errstate(all="ignore"):
                if fit_ratio(got, np.where(mask, v, want), E) <= 1:
                    widths = "/".join(str(w) for w in TAIL_VECTORS if L > w and L % w == L % V)
                    return {"mechanism": mech, "text": f"{label} is the formula's except at the last {L % V} of every "
                                                       f"{L} positions (the scalar remainder of a {widths}-wide vector "
                                                       f"body), which match the formula with {text}"}
    return None


def backward_terms(case, record, ref, done, fit_ratio, size_cap) -> list:
    """Explanations of the failing gradients of one step not in ``done`` ((part, name) already explained),
    when no output fails (the forward is right) and x has at most ``size_cap`` elements: per array,
    ``explain_grad`` on the decomposition's sets that reproduce the reference gradient; then a coefficient
    set found for one array tried on the others with the same terms. ``fit_ratio``: explain.fit_ratio (given
    by the caller: explain.py imports this module). A list of explanations (explain._explain's entries)."""
    x = record.inputs.get("x")
    todo = [(p, n) for p, n in record.failing if p == "grads" and (p, n) not in set(done)]
    if x is None or np.size(x) > size_cap or not todo or any(p == "outputs" for p, _ in record.failing):
        return []
    try:
        dec = decompose(case, record.inputs, record.cotangents, record.training, ref, record.state)
    except Exception:                                       # noqa: BLE001 - a configuration not decomposed
        return []
    out, left, found = [], [], {}
    for part, name in todo:
        grad, got, want, E = dec.get(name), record.got[part].get(name), ref.grads.get(name), record.E[part].get(name)
        if grad is None or got is None or want is None or E is None or np.shape(got) != np.shape(want) \
                or grad.shape != tuple(np.shape(want)) or not grad.sets:
            continue
        with np.errstate(all="ignore"):
            grad.sets = [s for s in grad.sets if _agrees(s[1], want)]
            if not grad.sets:                               # this configuration is not the decomposition's
                continue
            e = explain_grad(_label(part, name), grad, got, want, E, fit_ratio)
        if e is None:
            left.append((part, name, grad, got, E))
            continue
        if "coefficients" in e:
            found.setdefault(*e.pop("coefficients"))
        if e.pop("count_factor", None) == (_channels_per_group(case, x) or 0) > 1:
            e.update(mechanism="group", text=e["text"] + " (one channel's count where its group's belongs)")
        out.append({"part": part, "name": name, "step": record.step, **e})
    for part, name, grad, got, E in left:
        with np.errstate(all="ignore"):
            e = _carried(_label(part, name), grad, got, E, scaled(fit_ratio, ref.grads[name]), found) \
                if found else None
        if e is not None:
            e.pop("coefficients")
            if e.pop("count_factor", None) == (_channels_per_group(case, x) or 0) > 1:
                e.update(mechanism="group", text=e["text"] + " (one channel's count where its group's belongs)")
            out.append({"part": part, "name": name, "step": record.step, **e})
    return out
