"""Local response normalization's backward (Krizhevsky et al. 2012; refnorm/norms/local_response_norm.py).

One (sample, spatial position): the C channel values x_1..x_C. The forward of the module docstring,

    s_c = k + (alpha / size) sum_{c'} w_{c,c'} x_{c'}^2,      y_c = x_c s_c^(-beta),

with the window indicator w_{c,c'} = 1 for c - lo <= c' <= c + hi (clipped to 1..C: zero padding, and
the sum divided by ``size`` also at the borders). torch: lo = floor(size/2), hi = floor((size-1)/2);
ONNX: the two reaches exchanged. The chain rule gives

    dx_j = dy_j s_j^(-beta) - (2 alpha beta / size) x_j sum_c w_{c,j} dy_c x_c s_c^(-beta-1),

where sum_c w_{c,j} runs over the TRANSPOSED window, c in [j - hi, j + lo]: ``window_sum`` with the
reaches swapped in ``local_response_norm.backward``. ``prove()`` checks the chain rule for a symbolic
window matrix w (so for every window) and symbolic alpha, beta, k, size, and the transposition for
every size and channel count up to 7 under both conventions.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, lambdify_slices
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, dx, dy, i, j, l, x, y

NAME = "local_response_norm"
N = ROW.copy()
C = N.symbol("C", "C", integer=True, positive=True)
c = N.symbol("c", "c", integer=True, positive=True)
w = N.indexed("w", "w_{{{i}}}", "w[{i}]")
wt = N.indexed("wt", r"w^{{\top}}_{{{i}}}", "wᵀ[{i}]")
sc = N.indexed("s", "s_{{{i}}}", "s[{i}]")
ds = N.grad(sc, "ds")
dsdx = N.indexed("dsdx", r"\left(\frac{{\partial s}}{{\partial x}}\right)_{{{i}}}", "(∂s/∂x)[{i}]")
alpha = N.symbol("alpha", r"\alpha", "α", positive=True)
beta = N.symbol("beta", r"\beta", "β", real=True)
kk = N.symbol("k", "k", "k", positive=True)
size = N.symbol("size", r"\mathrm{size}", "size", integer=True, positive=True)
lo = N.symbol("lo", r"\mathrm{lo}", "lo", integer=True, nonnegative=True)
hi = N.symbol("hi", r"\mathrm{hi}", "hi", integer=True, nonnegative=True)

F_LO = sp.floor(size / 2)
F_HI = sp.floor(sp.Mul(size - 1, sp.Pow(sp.Integer(2), -1, evaluate=False), evaluate=False), evaluate=False)
F_S = kk + alpha / size * sp.Sum(w[c, i] * x[i] ** 2, (i, 1, C))
F_Y = x[c] * sc[c] ** (-beta)
B_DS = -beta * dy[c] * x[c] * sc[c] ** (-beta - 1)
B_DSX = 2 * alpha / size * w[c, j] * x[j]
B_DX = sp.Add(dy[j] * sc[j] ** (-beta), sp.Sum(ds[c] * dsdx[c, j], (c, 1, C)), evaluate=False)
C_DX = sp.Add(dy[j] * sc[j] ** (-beta),
              -2 * alpha * beta / size * x[j] * sp.Sum(w[c, j] * dy[c] * x[c] * sc[c] ** (-beta - 1), (c, 1, C)),
              evaluate=False)
T_W = sp.Eq(w[c, j], wt[j, c])


def document() -> Document:
    fwd = Section("Forward (one sample, one spatial position)", (
        "The window of channel c is c − lo..c + hi, clipped to the channels 1..C (zero padding); w_{c,c'} is 1 "
        "when c' is in it and 0 otherwise. The reaches, for `window=\"torch\"` (the default):",
        Step("torch pads the channel axis by (size//2, (size−1)//2) before its average pool.", sp.Eq(lo, F_LO)),
        Step("For odd size the window is centred; for even size torch's is one channel lower.", sp.Eq(hi, F_HI)),
        "`window=\"onnx\"` (the LRN-13 formula) exchanges the two: lo = ⌊(size−1)/2⌋, hi = ⌊size/2⌋.",
        Step("The scale: the window's sum of squares, always divided by size (also at the borders, where "
             "fewer channels exist: count_include_pad), plus k > 0.", sp.Eq(sc[c], F_S)),
        Step("The output; β is any real number.", sp.Eq(y[c], F_Y)),
    ))
    bwd = Section("Backward", (
        "x_j reaches ℓ through y_j directly, and through the scale s_c of every channel c whose window "
        "contains j. Nothing crosses samples or spatial positions.",
        Step("s_c reaches ℓ through y_c only.", sp.Eq(ds[c], B_DS), "ds"),
        Step("x_j enters s_c through its square, if j is in c's window.", sp.Eq(dsdx[c, j], B_DSX), "dsx"),
        Step("The two paths from x_j.", sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "[`local_response_norm.backward`](../refnorm/norms/local_response_norm.py) computes:",
        Step("The direct term, and the scales' term: a window sum of ∂ℓ/∂y_c x_c s_c^(−β−1), taken over the "
             "channels c whose window contains j.", sp.Eq(dx[j], C_DX), "compact"),
        Step("Which channels those are: w_{c,j} = 1 exactly when j − hi ≤ c ≤ j + lo, the window with its two "
             "reaches exchanged (wᵀ is the window with lo and hi swapped). The code's backward therefore calls "
             "`window_sum(…, hi, lo)`. This matters only for even size: for odd size lo = hi.",
             T_W, "transpose"),
    ))
    return Document(
        name=NAME, title="Local response normalization: the backward pass", notation=N,
        intro=("Local response normalization (Krizhevsky et al. 2012; torch's `local_response_norm`, ONNX LRN) "
               "divides each value by a power of the sum of squares over a window of `size` neighbouring "
               "channels. Below: the C channels of one sample at one spatial position; the window is written as "
               "a 0/1 matrix w, so that the chain rule holds for any window.",),
        sections=(fwd, bwd, compact),
        checks=(
            "`prove()`: every backward step and the closed form against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i "
            "for a symbolic window matrix w and symbolic α, β, k, size, for C = 2..5 and for general C; the "
            "transposed window (step 9) for every size 1..7 and C = 1..7 under both conventions.",
            f"`check_numeric()`: the closed forms against {spec_ref(NAME)} "
            "(y, scale, dx) for odd and even sizes, a size larger than C, both window conventions and β of "
            "either sign.",
        ),
        links=navigation("local_response_norm", "mean_variance_norm"),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
def _scale(q):
    """s_q as a function of x (eq. 3), summed over l."""
    return kk + alpha / size * sp.Sum(w[q, l] * x[l] ** 2, (l, 1, C))


def _fold(e):
    """Every power of a scale expression s_q(x) (as built by ``_scale``) becomes the same power of s[q]."""
    def index(b):
        if not (isinstance(b, sp.Add) and kk in b.args):
            return None
        ws = [t for t in b.atoms(sp.Indexed) if t.base == w]
        return ws[0].indices[0] if ws and b == _scale(ws[0].indices[0]) else None
    return e.replace(lambda t: isinstance(t, sp.Pow) and index(t.base) is not None,
                     lambda t: sc[index(t.base)] ** t.exp)


def _powers(e):
    """Every power s^(n - β) written as s^(-β) s^n (n an integer): SymPy keeps s^(-β) / s and s^(-β-1)
    apart, and this makes them one form."""
    return e.replace(lambda t: isinstance(t, sp.Pow) and t.exp.has(beta) and (t.exp + beta).is_integer,
                     lambda t: t.base ** (-beta) * t.base ** (t.exp + beta))


def reach(sz: int, window: str) -> tuple[int, int]:
    """(lo, hi) of eqs. 1-2 (torch) or exchanged (onnx), evaluated from the SymPy expressions."""
    lo_, hi_ = int(F_LO.subs(size, sz)), int(F_HI.subs(size, sz))
    return (lo_, hi_) if window == "torch" else (hi_, lo_)


def window_matrix(nc: int, lo_: int, hi_: int) -> np.ndarray:
    """w[c, c'] = 1 if c - lo <= c' <= c + hi (0-based, clipped to the channels)."""
    cc = np.arange(nc)
    return ((cc[None, :] >= cc[:, None] - lo_) & (cc[None, :] <= cc[:, None] + hi_)).astype(float)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    """Every keyed step of document() (C = ``sizes`` and general C, symbolic window w)."""
    P = Prover(NAME)
    L = sp.Sum(dy[i] * x[i] * _scale(i) ** (-beta), (i, 1, C))
    true_dx = lambda J: _fold(sp.diff(L, x[J]))  # noqa: E731
    rg = {j: (1, C), c: (1, C)}
    # graph view: ℓ(x, s) with the scales independent nodes
    Lg = sp.Sum(dy[i] * x[i] * sc[i] ** (-beta), (i, 1, C))
    P.identity("ds", lambda J: sp.diff(Lg, sc[J]) - B_DS.xreplace({c: J}), m=C, j=j, sizes=sizes, general=general,
               rewrite=_powers)
    P.identity("dsx", lambda J: sp.diff(_scale(c), x[J]) - B_DSX.xreplace({j: J}), m=C, j=j, sizes=sizes,
               general=general, ranges=rg)
    fill = lambda e: e.replace(  # noqa: E731  (steps 6 and 7 into step 8)
        lambda t: isinstance(t, sp.Indexed) and t.base in (ds, dsdx),
        lambda t: B_DS.xreplace({c: t.indices[0]}) if t.base == ds
        else B_DSX.xreplace({c: t.indices[0], j: t.indices[1]}))
    P.identity("dx", lambda J: true_dx(J) - fill(B_DX.xreplace({j: J})), m=C, j=j, sizes=sizes, general=general,
               rewrite=_powers)
    P.identity("compact", lambda J: true_dx(J) - C_DX.xreplace({j: J}), m=C, j=j, sizes=sizes, general=general,
               rewrite=_powers)
    # the transposed window, for the actual windows
    for window in ("torch", "onnx"):
        for sz in range(1, 8):
            lo_, hi_ = reach(sz, window)
            for nc in range(1, 8):
                bad = int(np.sum(window_matrix(nc, lo_, hi_).T != window_matrix(nc, hi_, lo_)))
                P.claim("transpose", f"{nc}, size = {sz}, {window}", sp.Integer(bad))
    return P.done()


# ----------------------------------------------------------------------------------------- numeric
def _forms(M: int):
    """Concrete expressions (s, y, dx) of channels 1..M for C = M (w a symbolic matrix)."""
    conc = lambda e: e.xreplace({C: M}).doit()  # noqa: E731
    ss = [conc(_scale(q)) for q in range(1, M + 1)]
    sub_s = {sc[q]: ss[q - 1] for q in range(1, M + 1)}
    ys = [F_Y.xreplace({c: q}).xreplace(sub_s) for q in range(1, M + 1)]
    dxs = [conc(C_DX.xreplace({j: q})).xreplace(sub_s) for q in range(1, M + 1)]
    return ss, ys, dxs


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261201) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    Nb, H = 2, 3
    for nc, sz, window, a_, b_, k_ in ((5, 3, "torch", 0.5, 0.75, 1.0), (5, 2, "torch", 0.8, 0.75, 2.0),
                                       (5, 2, "onnx", 0.8, 0.75, 2.0), (4, 4, "onnx", 0.3, -0.6, 0.5),
                                       (4, 4, "torch", 0.3, 1.3, 0.5), (3, 7, "torch", 1e-4, 0.75, 1.0)):
        xs, dyv = rng.standard_normal((Nb, nc, H)) * 1.5, rng.standard_normal((Nb, nc, H))
        cfg = {"size": sz, "alpha": a_, "beta": b_, "k": k_, "window": window}
        res = spec_evaluate(NAME, {"x": xs}, config=cfg, grad_outputs={"y": dyv})
        rows = lambda t: np.moveaxis(t, 1, -1).reshape(-1, nc)  # noqa: E731  (one row per sample and position)
        X, G = rows(xs), rows(dyv)
        lo_, hi_ = reach(sz, window)
        W = np.broadcast_to(window_matrix(nc, lo_, hi_), (X.shape[0], nc, nc))
        ss, ys, dxs = _forms(nc)
        vals = lambdify_slices(ss + ys + dxs, {x: X, dy: G, w: (W, (nc, nc))},
                               {alpha: a_, beta: b_, kk: k_, size: sz}, nc)
        sv, yv, dxv = (np.stack(vals[q * nc:(q + 1) * nc], -1) for q in range(3))
        tag = f"C={nc} size={sz} {window} beta={b_}"
        chk.compare(f"scale {tag}", rows(res.outputs["scale"]), sv)
        chk.compare(f"y {tag}", rows(res.outputs["y"]), yv)
        chk.compare(f"dx {tag}", rows(res.grads["x"]), dxv)
    return chk.done()
