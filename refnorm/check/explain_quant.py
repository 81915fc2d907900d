"""Quantized outputs judged at the kernel's own returned scale (issue 33: norm_quant, norm_quant_block).

A quantizing kernel returns codes q and the scale(s) it divided by. The reference's pre-quantization
values y (float64, the specification's norm output) are quantized again with the KERNEL's decode scale
D_k (its returned scale; norm_quant_block's nvfp4: the E4M3 block scale times its returned tensor scale,
else the reference's):

* q fits clip(y / D_k) within q's bound while the scale fails: the codes follow from the returned scale,
  and the failure is the scale's. The scale (and a failing amax, tensor_scale) is then explained by one
  of the structured deviations of its computation (each context's ``candidates``): the amax over another scope (the
  whole tensor, the row, blocks of another size) or of another tensor (the pre-norm x, x_hat before the
  weight and bias, y before the bias, y rounded to the case dtype); another maximum or emax (amax / 128
  where 127 belongs, e5m2's emax 15 taken as e4m3's 8, nvfp4's encode factor 448 / g where 448 * 6 / g
  belongs, amax itself: the division missing); scale_ub or min_scale applied to amax before the
  division; the scale floored at another value (read off the returned scale: its smallest value above the
  expected one that two rows hold); the reciprocal; a constant factor (2^k, a ratio of two maxima); the scale rounded to the
  case dtype, bfloat16 or float16 ("precision"; up or down to one: "scale_rounding"); a power-of-two or E4M3
  scale rounded by another rule
  (the other direction: "scale_rounding"; to nearest or not at all: "quant_scale"; E4M3 toward zero:
  "rounding").
* q fits clip(y' / D) for such a candidate's decode scale D (every failing returned array fitting it
  too): q was divided by that scale (the returned one, when it passes, is not what divided q).
* otherwise, the returned scale passing, q fits a transform of y / D_k: y multiplied by the scale
  ("quant_scale"), rounded through float16 / bfloat16 first (double rounding), toward zero, down, up or
  half away from zero ("rounding"), not saturated (NaN / inf / int8 wrap-around) or saturated at another maximum
  ("saturation").

q's bound at another scale D: the check's own E_q times max(1, D_ref / D) (q grows as D shrinks). An
explanation is named only when it reproduces every failing array within its bound, the reference itself
does not by the same test (an array failing the check's bias test alone leaves no arithmetic to tell the
candidates apart: nothing is named), and every fitting candidate agrees on the mechanism (a structured
deviation before a bare factor 2^k or the reciprocal). Only failing cases, up to ``limit``
elements of x. Pure NumPy; never changes a verdict.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..norms import norm_quant as NQ
from ..norms import norm_quant_block as NB
from .precision import estimate_like, round_to, round_toward_zero

OPS = ("norm_quant", "norm_quant_block")
_BF16 = ml_dtypes.bfloat16
NAMES = ("q", "scale", "amax", "tensor_scale")
# the largest values a kernel may divide by, by name (the element maxima of the quantized dtypes, int8's range
# magnitude 128, float8 e4m3fnuz's 240): the divisors of the "another maximum" candidates
MAXIMA = {127.0: "int8's maximum 127", 128.0: "int8's range magnitude 128", 240.0: "float8 e4m3fnuz's maximum 240",
          448.0: "float8 e4m3fn's maximum 448", 57344.0: "float8 e5m2's maximum 57344", 6.0: "fp4 e2m1's maximum 6",
          1.0: "1 (the division by the maximum missing)", 65504.0: "float16's largest value 65504 (the input dtype's "
          "finfo max)", 3.3895313892515355e38: "bfloat16's largest value (the input dtype's finfo max)",
          3.4028234663852886e38: "float32's largest value (the input dtype's finfo max)"}
FINFO = (65504.0, 3.3895313892515355e38, 3.4028234663852886e38)     # an activation dtype's finfo max among them
EMAX = {8: "e4m3's emax 8", 15: "e5m2's emax 15", 2: "fp4's emax 2"}


def quant_deviation(case, record, ref, fit, limit):
    """The explanation ({"mechanism", "text"}) of every failing array of a quantizing op's step at the kernel's
    own scale (module docstring), or None. ``fit(got, explained, E)``: the check's ratio (explain.fit_ratio);
    ``limit``: the most elements of x searched (explain.CONFIG_SIZE)."""
    x = record.inputs.get("x")
    F = set(n for p, n in record.failing if p == "outputs")
    if case.op not in OPS or x is None or np.size(x) > limit or not F or len(F) != len(record.failing) \
            or not F <= set(NAMES) or "q" not in record.got["outputs"]:
        return None
    try:
        with np.errstate(all="ignore"):
            ctx = (_RowCtx if case.op == "norm_quant" else _BlockCtx)(case, record, ref)
            return _search(ctx, record, F, fit)
    except (KeyError, IndexError, TypeError, ValueError):     # a config or array the search does not model
        return None


def _search(ctx, record, F, fit):
    """The explanation of the failing output names ``F`` by the context's candidates and transforms (module
    docstring), or None."""
    got, E = record.got["outputs"], record.E["outputs"]
    qg = got["q"]

    def q_fits(num, D, transform=None):
        v, Eq = ctx.q_of(num, D), E["q"] * ctx.widen(D)
        if transform is not None:               # monotone, maybe discontinuous: got where it lies in T([v -+ E])
            with np.errstate(all="ignore"):
                raw = ctx.q_of(num, D, clip=False)
                lo = transform(np.clip(v - Eq, *ctx.table[1:]), raw - Eq)
                hi = transform(np.clip(v + Eq, *ctx.table[1:]), raw + Eq)
                v = np.where(np.isnan(lo) | np.isnan(hi), np.nan, _within(qg, lo, hi))
        return np.shape(v) == np.shape(qg) and fit(qg, v, Eq) <= 1

    def arrays_fit(c, names):
        return all(n in c["arrays"] and _fits(got[n], c["arrays"][n], c.get("E", {}).get(n, E[n]), fit)
                   for n in names)

    Dk = ctx.kernel_D()
    q_at_kernel = "q" in F and Dk is not None and q_fits(ctx.y, Dk)
    rest = F - {"q"}
    scales = rest & {"scale", "tensor_scale"}
    found, stat_only = [], None
    for c in ctx.candidates():
        if ("q" not in F and c.get("generic")) or not arrays_fit(c, rest):   # a scale alone: explain.factor, power
            continue
        if "q" not in F and not arrays_fit(c, set(c["arrays"]) & set(got) - F):
            # the codes pass, and so does a scale the candidate changes: it is not how the scale was computed.
            # Where the amax alone fails, that returned statistic was taken at another stage (no mechanism)
            if F == {"amax"} and c["text"].startswith("is computed from the amax of ") and stat_only is None:
                stat_only = c["text"][len("is computed from the amax of "):]
            continue
        if "q" not in F:
            ok = bool(rest)
        elif q_at_kernel and scales:
            ok = True                               # the codes follow from the returned (explained) scale
        else:
            D = c["D"]
            if isinstance(D, tuple):                # a range of admissible scales: the kernel's, where admissible
                D = D[1] if Dk is None else np.clip(Dk, *D)
            ok = q_fits(c.get("num", ctx.y), D)
        if ok and c.get("reference"):           # the failure is the bias test's: no arithmetic tells it apart
            return None
        if ok:
            found.append(c)
    codes = []                                  # the codes made another way at the returned (passing) scale
    if F == {"q"} and Dk is not None:
        codes = [{"mech": mech, "text": text if text.startswith("q is") else f"q is y divided by the returned "
                  f"scale, {text}", "final": True, "transform": transform}
                 for transform, text, mech in ctx.transforms(Dk) if q_fits(ctx.y, Dk, transform)]
        codes = _fewest_mismatches(ctx, Dk, codes, qg)
    found = [c for c in found if not c.get("generic")] or found or codes    # structured deviations before a factor
    if not found and stat_only is not None:
        return {"mechanism": None, "text": f"the returned amax is the max of |{stat_only}| where y's belongs (the "
                                           f"scale and q, which pass, are y's: a returned statistic taken at another "
                                           f"stage has no mechanism, docs/verdicts.md)"}
    if not found or len({c["mech"] for c in found + codes}) > 1:           # none, or two mechanisms: no name
        return None
    c = found[0]
    if c.get("final"):                          # its text says it all
        return {"mechanism": c["mech"], "text": c["text"]}
    if "q" in F and not scales:                 # the returned scales pass: q was divided by another one
        return {"mechanism": c["mech"], "text": f"q is {'that y' if 'num' in c else 'y'} divided by a {ctx.what} "
                                                f"that {c['text']} (the returned scale, which passes, is not the "
                                                "one q was divided by)"}
    how = " and q is y divided by the returned scale" if q_at_kernel and scales else \
        (f" and q is {'that y' if 'num' in c else 'y'} divided by it" if "q" in F else "")
    return {"mechanism": c["mech"], "text": f"the {ctx.what} {c['text']}{how}"}


def _fewest_mismatches(ctx, D, codes, qg):
    """Where more than one way of making the codes fits (each within the bound: they differ by a code near a
    midpoint), those whose codes are the kernel's exactly at the most elements: the fewest mismatched codes,
    fewer than half of any other's less four (else all: left unnamed where their mechanisms differ, the first
    one's words where they agree)."""
    if len(codes) < 2:
        return codes
    with np.errstate(all="ignore"):
        raw = ctx.q_of(ctx.y, D, clip=False)
        q = np.asarray(qg, dtype=np.float64)
        try:
            miss = [int(np.sum(np.asarray(NQ.quantize(c["transform"](np.clip(raw, *ctx.table[1:]), raw), ctx.qdtype),
                                          dtype=np.float64) != q)) for c in codes]
        except (ValueError, KeyError, TypeError):   # (int8 has no NaN: no exact codes to count)
            return codes
    best = min(miss)
    mechs = {c["mech"] for c, m in zip(codes, miss) if m == best}
    if len(mechs) == 1 and all(m == best or m >= 2 * best + 4 for m in miss):
        return [c for c, m in zip(codes, miss) if m == best]
    return codes


def _fits(got, want, E, fit):
    """fit(got, want, E) <= 1, with ``want`` an array or a range (lo, hi) of admissible values (got itself where
    it lies within)."""
    if isinstance(want, tuple):
        lo, hi = (np.reshape(w, np.shape(got)) if np.size(w) == np.size(got) else None for w in want)
        if lo is None or hi is None:
            return False
        want = _within(got, lo, hi)
    elif want is None or np.size(want) != np.size(got):
        return False
    return fit(got, np.reshape(want, np.shape(got)), E) <= 1


def _within(got, lo, hi):
    """got (as float64) where it lies within [lo, hi], else the nearer end; lo where got is NaN (a NaN is
    explained only by a NaN end)."""
    g = np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(g), lo, np.clip(g, lo, hi))


class _Ctx:
    """What both ops share: the case's tensors and the q transforms."""

    def __init__(self, case, record, ref):
        self.case, self.record, self.ref = case, record, ref
        self.inputs = {k: np.asarray(v, dtype=np.float64) for k, v in record.inputs.items()
                       if v is not None and np.asarray(v).dtype.kind not in "iub"}     # bfloat16's kind is "V"
        self.got = record.got["outputs"]

    def widen(self, D):
        """max(1, D_ref / D) per element of q: its bound at the decode scale D."""
        Dr, D = np.broadcast_to(self.ref_D(), self.amax.shape), np.broadcast_to(D, self.amax.shape)
        r = np.where(D > 0, Dr / np.where(D > 0, D, 1.0), 1.0)
        return self.spread(np.maximum(1.0, np.where(np.isfinite(r), r, 1.0)))

    def sources(self):
        """(values, what) of the tensors a scale may wrongly be computed from."""
        out = [(self.pre, "the pre-norm x" if "residual" not in self.inputs else "the pre-norm x + residual"),
               (self.xh, "x_hat (before the weight and bias)")]
        if self.inputs.get("bias") is not None:
            out.append((self.yw, "y before the bias"))
        if self.case.dtype in ("float16", "bfloat16"):
            out.append((np.asarray(round_to(self.y, self.case.dtype), dtype=np.float64),
                        f"y rounded to {self.case.dtype}"))
        return out

    def transforms(self, D):
        """(transform(clip(y / D), y / D), what, mechanism) for the codes made another way at the returned scale
        D (each monotone in y / D); a ``what`` starting "q is" says it all."""
        qd, (dt, lo, hi) = self.qdtype, self.table
        out = [(lambda v, raw, d=d: np.asarray(round_to(v, d), dtype=np.float64),
                f"rounded to {d} first and then to {qd} (two roundings)", "precision") for d in ("float16", "bfloat16")]
        if qd.startswith("float4"):             # through the wider float8 e4m3 on the way (a two-step conversion)
            out.append((lambda v, raw: np.asarray(np.asarray(v, dtype=np.float64).astype(ml_dtypes.float8_e4m3fn),
                                                  dtype=np.float64),
                        f"rounded to float8_e4m3fn first and then to {qd} (two roundings)", "precision"))
        # (two roundings to nearest: the quotient held in a 16-bit dtype on its way, rule 8's precision; a rounding
        # mode of the conversion itself, toward zero, down or up, is rule 8's rounding: the 16-bit step truncating)
        out += [(lambda v, raw, t=t: round_toward_zero(v, t), f"rounded to {d} toward zero first and then to {qd} to "
                 "nearest (the first conversion truncating)", "rounding")
                for d, t in (("float16", np.float16), ("bfloat16", _BF16))]
        for d in ("float16", "bfloat16"):       # y times the scale's reciprocal held in a 16-bit dtype (rule 8)
            r = self.spread(D * np.asarray(round_to(1.0 / D, d), dtype=np.float64))     # (per block: q's shape)
            out.append((lambda v, raw, r=r: np.clip(raw * r, lo, hi), f"q is y times the reciprocal of the returned "
                        f"scale rounded to {d} (1 / scale held in {d}, then multiplied)", "precision"))
        out += [(lambda v, raw: _grid_round(v, self.grid, "zero"), f"rounded to {qd} toward zero", "rounding"),
                (lambda v, raw: _grid_round(v, self.grid, "away"), f"rounded to {qd} half away from zero", "rounding"),
                (lambda v, raw: _grid_round(v, self.grid, "down"), f"rounded to {qd} down (floor)", "rounding"),
                (lambda v, raw: _grid_round(v, self.grid, "up"), f"rounded to {qd} up (ceil)", "rounding")]
        if dt.kind == "i":
            out.append((lambda v, raw: ((np.rint(raw) + 128) % 256) - 128, "wrapped around int8 (not saturated)",
                        "saturation"))
            out.append((lambda v, raw: np.trunc(np.asarray(v, dtype=np.float64) + 0.5), "rounded as (int)(v + 0.5): "
                        "one half added, then truncated toward zero (negative quotients one code high)", "rounding"))
        else:                                   # (an integer quantizer's rint step kept before a float format's
            out.append((lambda v, raw: np.rint(v), f"rounded to an integer first (rint, an int8 quantizer's step) "
                        f"and then to {qd}", "precision"))                      # conversion: rule 8, to nearest)
            out.append((lambda v, raw: np.where(np.isfinite(_nonsat(raw, dt)), raw, _nonsat(raw, dt)),
                        f"not saturated ({qd} overflows to {'NaN' if 'e4m3' in qd else 'inf'})", "saturation"))
        if self.what == "scale":        # (one scale per row: a tile's lanes loaded without the tile's start)
            N = np.shape(self.y)[-1]
            out += [(lambda v, raw, idx=np.arange(N) % T: np.asarray(v)[..., idx], f"q is y divided by the returned "
                     f"scale, column j's codes those of column j mod {T} (each {T}-wide tile's loads without the "
                     "tile's start)", "layout") for T in (16, 32, 64, 128) if T < N]
        maxima = dict(MAXIMA)
        if dt.kind != "i":                          # the format's largest power of two, 2^emax (MX's clip)
            p2 = 2.0 ** np.floor(np.log2(hi))
            maxima.setdefault(p2, f"2^emax = {p2:g}, {qd}'s largest power of two")
        for m, what in maxima.items():
            if 1.0 < m < hi:
                out.append((lambda v, raw, m=m: np.clip(v, -m, m), f"saturated at {m:g} ({what}) where {hi:g} belongs",
                            "saturation"))
        return out


class _RowCtx(_Ctx):
    """norm_quant: one scale per row (per token) or a static one."""
    what = "scale"

    def __init__(self, case, record, ref):
        super().__init__(case, record, ref)
        cfg = {**NQ.SPEC.options, **case.config}
        i = self.inputs
        x, w, b, st = i["x"], i.get("weight"), i.get("bias"), i.get("static_scale")
        shape, eps, floor = NQ.check(x, w, b, st, cfg["normalized_shape"], cfg["norm"], cfg["eps"],
                                     cfg["quant_dtype"], cfg["scale_ub"], cfg["min_scale"])
        f = NQ._ln.forward if cfg["norm"] == "layer_norm" else (lambda x, w, b, **k: NQ._rms.forward(x, w, **k))
        norm = lambda w, b: f(x, w, b, normalized_shape=shape, eps=eps)[0]  # noqa: E731
        self.y, self.xh, self.yw, self.pre = norm(w, b), norm(None, None), norm(w, None), x
        self.eps = float(eps)
        self.axes = tuple(range(x.ndim - len(shape), x.ndim))
        self.qdtype, self.static = cfg["quant_dtype"], st
        self.table = NQ.QUANT_DTYPES[self.qdtype]
        self.qmax = self.table[2]
        self.ub = None if cfg["scale_ub"] is None else float(cfg["scale_ub"])
        self.floor = floor
        self.grid = _grid(self.table)
        self.amax = np.max(np.abs(self.y), axis=self.axes, keepdims=True, initial=0.0)

    def spread(self, a):
        return a                       # one scale per row: broadcast over the row by NumPy

    @staticmethod
    def cuts(N):
        """(columns kept, what) of an amax loop over blocks of k columns stopping early: the last block never
        entered (range(0, N - k, k)), or the partial tail block dropped (N // k full blocks)."""
        out = {}
        for k in (16, 32, 64, 128, 256, 512, 1024):
            if N > k:
                out.setdefault(k * -(-(N - k) // k), f"the last block of {k} columns left out of the loop")
            if N > k and N % k:
                out.setdefault(N // k * k, f"the partial tail block of the {k}-column blocks dropped")
        return [(c, w) for c, w in out.items() if 0 < c < N]

    def ref_D(self):
        return np.asarray(self.ref.outputs["scale"], dtype=np.float64)

    def kernel_D(self):
        s = self.got.get("scale")
        return None if s is None else np.asarray(s, dtype=np.float64).reshape(np.shape(self.amax))

    @staticmethod
    def previous(D):
        """(each row's scale replaced by the previous row's, row 0 its own; "row")."""
        f = np.asarray(D).reshape(-1)
        return np.concatenate([f[:1], f[:-1]]).reshape(np.shape(D)), "row"

    def q_of(self, num, D, clip=True):
        v = NQ.divide(num, D)
        return np.clip(v, self.table[1], self.table[2]) if clip else v

    def dyn(self, amax, qm=None, ub_amax=False, floor_amax=False):
        """The dynamic scale from ``amax`` with the divisor ``qm``, scale_ub / min_scale applied to amax
        (before the division) where the flags say."""
        qm = self.qmax if qm is None else qm
        a = amax if self.ub is None or not ub_amax else np.minimum(amax, self.ub)
        a = np.maximum(a, self.floor) if floor_amax else a
        s = a / qm
        if self.ub is not None and not ub_amax:
            s = np.minimum(s, self.ub)
        return s if floor_amax else np.maximum(s, self.floor)

    def candidates(self):
        out = []
        ref_s = self.ref_D()

        def add(scale, text, mech, amax=None, num=None, D=None):
            c = {"arrays": {"scale": scale, "amax": self.amax if amax is None else amax},
                 "D": scale if D is None else D, "text": text, "mech": mech}
            if num is not None:
                c["num"] = num
            out.append(c)

        add(ref_s, "", None)
        out[-1]["reference"] = True
        ga = self.got.get("amax")                # each row's rstd an approximate reciprocal square root (its error
        if ga is not None and np.size(ga) == self.amax.size and self.amax.size >= 4:    # read off the row's amax)
            with np.errstate(all="ignore"):
                rel = np.asarray(ga, dtype=np.float64).reshape(self.amax.shape) / self.amax - 1.0
            if np.all(np.isfinite(rel)) and estimate_like(rel):
                num = self.y + self.yw * rel
                a2 = np.max(np.abs(num), axis=self.axes, keepdims=True, initial=0.0)
                add(ref_s if self.static is not None else self.dyn(a2), f"is computed from y with each row's rstd off by "
                    f"up to {np.max(np.abs(rel)):.1e} relative, on both sides (an approximate reciprocal square root "
                    "without a Newton step), and q from that y", "precision", amax=a2, num=num)
        # the scale applied twice (the caller divides y by it and the fused kernel again): q = y / s^2
        out.append({"arrays": {"scale": ref_s, "amax": self.amax}, "D": ref_s * ref_s, "mech": "quant_scale",
                    "final": True, "text": "q is y divided by the scale twice, y / s^2 (the caller's division and the "
                                           "kernel's; the returned scale right)"})
        if self.static is None:
            default_floor = self.case.config.get("min_scale") is None
            scale_fails = ("outputs", "scale") in self.record.failing
            for qm, what in MAXIMA.items():
                if qm in FINFO and not scale_fails:
                    continue        # (q saturated by a scale ~ 0: any codes fit q's widened bound; the scale tells)
                if qm != self.qmax and qm not in FINFO:     # (those below the floor: its own floor, below)
                    add(self.dyn(self.amax, qm), f"is amax / {qm:g}: {what} where {self.qdtype}'s maximum "
                                                 f"{self.qmax:g} belongs (the factor {self.qmax:g}/{qm:g})",
                        "quant_scale")
                if qm != self.qmax and default_floor and qm > self.qmax:
                    # (the default floor 1 / (qmax 512) from that maximum too; a float32 quotient, subnormal
                    # below 2^-126)
                    s2 = np.asarray(self.amax / qm, dtype=np.float32).astype(np.float64)
                    s2 = np.maximum(s2 if self.ub is None else np.minimum(s2, self.ub), 1.0 / (qm * 512.0))
                    add(s2, f"is amax / {qm:g}: {what} where {self.qdtype}'s maximum {self.qmax:g} belongs, for the "
                            "division and the default floor 1 / (qmax 512) alike", "quant_scale")
            raw = self.dyn(self.amax)       # the dynamic scale rounded to a power of two (a UE8M0 scale's rule
            lo, hi = NB.F32_POW2_EXP        # where none belongs; a zero scale stays)
            for f, what in ((lambda v: NB.pow2_ceil(v, lo, hi), "up"), (lambda v: NB.pow2_floor(v, lo, hi), "down"),
                            (lambda v: _pow2_nearest(v, lo, hi), "to the nearest")):
                p2 = np.where(raw > 0, f(raw), raw)
                if not np.array_equal(p2, raw):
                    add(p2, f"is amax / qmax rounded {what} to a power of two (a power-of-two scale rule where the "
                            "raw quotient belongs)", "scale_rounding")
            if self.ub is not None:
                add(self.dyn(self.amax, ub_amax=True), f"is min(amax, scale_ub) / qmax: scale_ub ({self.ub:g}) "
                                                       "applied to the amax before the division", "quant_scale")
            if self.floor:
                add(np.minimum(self.amax / self.qmax, np.inf if self.ub is None else self.ub),
                    f"is amax / qmax without its floor min_scale ({self.floor:g})", "quant_scale")
                add(self.dyn(self.amax, floor_amax=True), f"is max(amax, min_scale) / qmax: min_scale "
                                                          f"({self.floor:g}) applied to the amax before the division",
                    "quant_scale")
            # the floor at another value c (a default floor written wrong: 1 / qmax * 512 for 1 / (qmax * 512)),
            # c read off the returned scale: the smallest value it holds above the expected one, held by 2+ rows
            g = self.record.got["outputs"].get("scale")
            if g is not None and np.shape(g) == np.shape(ref_s):
                g = np.asarray(g, dtype=np.float64)
                up = g[np.isfinite(g) & (g > ref_s)]
                vals, counts = np.unique(up, return_counts=True) if up.size else (up, up)
                c = next((float(v) for v, k in zip(vals, counts) if k >= 2), None)
                if c is not None and c > 0 and c != self.floor:
                    raw = np.minimum(self.amax / self.qmax, np.inf if self.ub is None else self.ub)
                    add(np.maximum(raw, c), f"is max(amax / qmax, {c:g}): the scale floored at {c:g} where its floor "
                                            f"min_scale is {self.floor:g}", "quant_scale")
            a_t = np.broadcast_to(np.max(self.amax, initial=0.0), self.amax.shape)
            if self.amax.size > 1:
                add(self.dyn(a_t), "is computed from the whole tensor's amax (one scale per tensor, not per row)",
                    "quant_scale", amax=a_t)
                Er = self.record.E["outputs"]                 # the bounds of the row the tensor's amax is in
                out[-1]["E"] = {n: np.full(self.amax.shape, np.max(Er[n])) for n in ("scale", "amax") if n in Er}
        if self.static is not None:         # the static scale taken another way (its reciprocal: q multiplied by it,
            #                               _common's)
            st = np.broadcast_to(np.asarray(self.static, dtype=np.float64).reshape(-1)[:1], self.amax.shape)
            add(self.dyn(self.amax), "is amax / qmax: the dynamic per-row scale where the static scale belongs (the "
                                     "static scale ignored)", "quant_scale")
            add(st / self.qmax, f"is static_scale / {self.qmax:g}: the static scale read as a calibrated amax",
                "quant_scale")
            if st.size > 1:                 # its one element loaded at each row's index (the per-token path's
                first = (np.arange(st.size) == 0).reshape(st.shape)      # stride kept), masked past it: 0
                add(np.where(first, st, 0.0), "is the static scale loaded at each row's index (the per-token stride "
                    "kept): row 0 reads it, every later row the masked load's 0", "quant_scale")
        elif self.ub is None and self.floor:    # an absent scale_ub loaded as 0: every row's scale its floor
            add(np.full(self.amax.shape, float(self.floor)), f"is min_scale ({self.floor:g}) on every row: the absent "
                                                             "scale_ub read as 0 (min(amax / qmax, 0) raised to the "
                                                             "floor)", "quant_scale")
        if self.static is None:             # the amax as max(y): the absolute value left out (a negative
            a_s = np.maximum(np.max(self.y, axis=self.axes, keepdims=True, initial=0.0), 0.0)   # extreme missed)
            if not np.array_equal(a_s, self.amax):
                add(self.dyn(a_s), "is computed from max(y) where max(|y|) belongs (the absolute value left out)",
                    "quant_scale", amax=a_s)
        if self.static is None:             # the amax loop over the row's column blocks of k stopping early
            N = self.y.shape[-1]
            for cut, what in self.cuts(N):
                a_c = np.max(np.abs(self.y[..., :cut]), axis=self.axes, keepdims=True, initial=0.0)
                if not np.array_equal(a_c, self.amax):
                    add(self.dyn(a_c), f"is computed from the amax of each row's columns 0-{cut - 1} only ({what})",
                        "block", amax=a_c)
        N = self.y.shape[-1]                # a 32-lane warp butterfly over the row's strided columns missing steps:
        j = np.arange(N)                    # lane 0 ends with the lanes below 16 (8) or the even ones only
        for keep, what in ((j % 32 < 16, "the first shuffle step (offset 16) missing: columns j % 32 < 16"),
                           (j % 32 < 8, "the first two shuffle steps missing: columns j % 32 < 8"),
                           (j % 2 == 0, "the last shuffle step (offset 1) missing: even columns")):
            if N <= 16 or keep.all():
                continue
            a_w = np.max(np.abs(np.where(keep, self.y, 0.0)), axis=self.axes, keepdims=True, initial=0.0)
            if np.array_equal(a_w, self.amax):
                continue
            text = f"amax is the max over the warp's lanes with {what} (the rest never reach lane 0)"
            if self.static is None:
                add(self.dyn(a_w), "is computed from an amax with " + what, "block", amax=a_w)
            else:
                out.append({"arrays": {"scale": ref_s, "amax": a_w}, "D": ref_s, "mech": "block", "final": True,
                            "text": text})
        for t, what in self.sources():
            a = np.max(np.abs(t), axis=self.axes, keepdims=True, initial=0.0)
            rounded = what.startswith("y rounded")
            if self.static is not None:             # the static scale is an input: only amax and q can follow
                for aa, num, says in ((a, None, f"amax is the max of |{what}| (where y's belongs)"),
                                      (a, t, f"amax and q are taken from {what} (an unrounded y belongs)"),
                                      (self.amax, t, f"q is {what} divided by the scale (an unrounded y belongs)")):
                    if num is None or rounded:      # (y stored in the 16-bit dtype before the quotient: rule 8)
                        out.append({"arrays": {"scale": ref_s, "amax": aa}, "D": ref_s,
                                    "mech": "quant_scale" if num is None else "precision",
                                    "final": True, "text": says, **({} if num is None else {"num": num})})
                if not rounded and t is not self.pre and (self.inputs.get("weight") is not None
                                                         or self.inputs.get("bias") is not None):
                    out.append({"arrays": {"scale": ref_s, "amax": self.amax}, "D": ref_s, "mech": "affine",
                                "final": True, "num": t, "text": f"q is {what} divided by the scale (y = x_hat * weight "
                                                                 "+ bias belongs: the affine left out of the quantizing "
                                                                 "pass)"})
                continue
            add(self.dyn(a), f"is computed from the amax of {what}", "quant_scale", amax=a)
            if not rounded and t is not self.pre and (self.inputs.get("weight") is not None
                                                     or self.inputs.get("bias") is not None):
                # the scale right (from y), q from a value without (part of) the affine: a quantizing pass that
                # recomputes the normalized value without reloading the parameters (rule 13's affine)
                add(ref_s, "", "affine", num=t)
                out[-1].update(final=True, text=f"the scale is right, but q is {what} divided by it (y = x_hat * "
                                                "weight + bias belongs: the affine left out of the quantizing pass)")
            if rounded:
                add(self.dyn(a), f"is computed from the amax of {what}, and q from that rounded y",
                    "precision", amax=a, num=t)     # (y stored in the 16-bit dtype, then quantized: rule 8)
                add(ref_s, "", "precision", num=t)
                out[-1].update(final=True, text=f"the scale is right, but q is {what} divided by it (an unrounded "
                                                "y belongs)")
        if self.static is None and self.eps > 0:     # the norm's eps added to amax as a division guard
            add(self.dyn(self.amax + self.eps), f"is (amax + eps) / qmax (the norm's eps {self.eps:g} added to amax as "
                                                "a division guard; the returned amax right)", "quant_scale")
        # the range max(y) - min(y) (an asymmetric quantizer's) where max|y| belongs (a static scale: amax alone)
        a = np.max(self.y, axis=self.axes, keepdims=True) - np.min(self.y, axis=self.axes, keepdims=True)
        if self.static is None:
            add(self.dyn(a), "is computed from the range max(y) - min(y) (an asymmetric quantizer's) where max|y| "
                             "belongs", "quant_scale", amax=a)
        else:
            out.append({"arrays": {"scale": ref_s, "amax": a}, "D": ref_s, "mech": "quant_scale", "final": True,
                        "text": "amax is the range max(y) - min(y) (an asymmetric quantizer's) where max|y| belongs"})
        w, b = self.inputs.get("weight"), self.inputs.get("bias")
        if self.static is None and w is not None:
            # amax bounded by the factors' maxima, max|x_hat| max|w| (+ max|b|), where max|x_hat w + b| belongs
            a = np.max(np.abs(self.xh), axis=self.axes, keepdims=True, initial=0.0) * np.max(np.abs(w))
            a = a + (0.0 if b is None else np.max(np.abs(b)))
            add(self.dyn(a), "is computed from max|x_hat| max|weight|" + ("" if b is None else " + max|bias|")
                + " (a bound from the factors' maxima) where max|y| belongs", "quant_scale", amax=a)
        for d in _low(self.case.dtype):
            add(np.asarray(round_to(ref_s, d), dtype=np.float64), f"is rounded to {d}"
                + (" (the input dtype)" if d == self.case.dtype else ""), "precision")
            a_r = np.asarray(round_to(self.amax, d), dtype=np.float64)     # the amax held in d (a 16-bit register)
            if self.static is None and not np.array_equal(a_r, self.amax):
                add(self.dyn(a_r), f"is computed from the amax rounded to {d} (held in a {d} register), that amax "
                                   "returned", "precision", amax=a_r)
            elif not np.array_equal(a_r, self.amax):        # a static scale: the returned amax alone follows
                out.append({"arrays": {"scale": ref_s, "amax": a_r}, "D": ref_s, "mech": "precision", "final": True,
                            "text": f"amax is rounded to {d} (held in a {d} register)"})
            for up in (True, False):            # stored in d by a directed conversion: the scale's rounding rule
                add(_directed_to(ref_s, d, up), f"is rounded {'up (toward +inf)' if up else 'down (toward -inf)'} "
                    f"to a {d} value", "scale_rounding")
        _common(self, out, add, ref_s)
        return out


class _BlockCtx(_Ctx):
    """norm_quant_block: one scale per block of the hidden axis (and nvfp4's tensor scale)."""
    what = "block scale"

    def __init__(self, case, record, ref):
        super().__init__(case, record, ref)
        i = self.inputs
        x, res, w, b, gs = (i.get(k) for k in ("x", "residual", "weight", "bias", "global_scale"))
        self.c, H, eps = NB.check(x, res, w, b, case.config, gs)
        s = x if res is None else x + res
        self.H, self.B, self.gs = H, self.c["block_size"], gs
        self.y, self.xh, self.yw = (NB.norm_of(s, ww, bb, self.c, H, eps)
                                    for ww, bb in ((w, b), (None, None), (w, None)))
        self.pre = s
        self.qdtype = self.c["element_dtype"]
        self.qmax = NB.qmax(self.qdtype)
        self.table = (NB.ELEMENTS[self.qdtype][0], -self.qmax, self.qmax)
        self.grid = _grid(self.table)
        self.amax = self.amax_of(self.y)
        self.fmt, self.rule = self.c["format"], self.c["scale_rule"]

    def amax_of(self, t, B=None):
        return np.max(np.abs(NB.blocked(t, B or self.B)), axis=-1, initial=0.0)

    def spread(self, a):
        """A per-block array (..., nb) as q's shape."""
        a = np.broadcast_to(a, self.amax.shape)
        return np.repeat(a, self.B, axis=-1)[..., :self.H].reshape(self.y.shape)

    def v_of(self, amax, factor=1.0, enc=None):
        """(pre-rounding scale, tensor scale) from the per-block ``amax``, the scale times ``factor`` (another
        maximum), nvfp4's encode scale ``enc`` (None: from ``amax``, as the spec)."""
        enc = NB.tensor_encode(amax, self.c, self.gs) if enc is None else enc
        v, _, ts = NB.block_scales(amax * factor, self.c, enc)
        return v, float(ts)

    def encode(self, v):
        """The stored scale of the rule (fp8_group's exact scale: v itself, judged in the case's float dtype)."""
        if (self.fmt, self.rule) == ("fp8_group", "exact"):
            return np.asarray(v, dtype=np.float64)
        return np.asarray(NB.encode_scale(v, self.c), dtype=np.float64)

    def ref_D(self):
        v, ts = self.v_of(self.amax)
        return self.encode(v) * ts

    def kernel_D(self):
        s = self.got.get("scale")
        if s is None or np.size(s) != self.amax.size:
            return None
        D = np.asarray(s, dtype=np.float64).reshape(self.amax.shape)
        if self.fmt == "nvfp4":
            ts = self.got.get("tensor_scale")
            D = D * (self.v_of(self.amax)[1] if ts is None else float(np.asarray(ts, dtype=np.float64).ravel()[0]))
        return D

    @staticmethod
    def previous(D):
        """(each block's scale replaced by the previous block's of its row, block 0 its own; "block")."""
        return np.concatenate([D[..., :1], D[..., :-1]], axis=-1), "block"

    def zero_block_scale(self, v_ref):
        """The one positive scale the kernel returns for every all-zero block where the rule gives another
        (a floor applied before the rounding), else None."""
        s = self.got.get("scale")
        if self.fmt != "fp8_group" or s is None or np.size(s) != v_ref.size:
            return None
        g = np.asarray(s, dtype=np.float64).reshape(v_ref.shape)[v_ref == 0]
        ok = g.size and np.all(g == g.flat[0]) and g.flat[0] > 0 and np.isfinite(g.flat[0])
        return float(g.flat[0]) if ok and self.encode(np.zeros(1))[0] != g.flat[0] else None

    def estimated_rows(self):
        """Each row's relative error of its rstd, read off the returned amax (the median over the row's blocks of
        amax / the reference's: y's weighted part scales with rstd), where it is like an approximate reciprocal
        square root's (precision.estimate_like), one factor per row (its blocks agree), at three rows or more: (rows, 1),
        else None."""
        ga = self.got.get("amax")
        if ga is None or np.size(ga) != self.amax.size or self.amax.ndim < 2:
            return None
        with np.errstate(all="ignore"):
            k = np.asarray(ga, dtype=np.float64).reshape(self.amax.shape) / self.amax
        k = np.where(np.isfinite(k) & (self.amax > 0), k, np.nan)
        rows = k.reshape(-1, k.shape[-1])
        if rows.shape[0] < 3 or rows.shape[1] < 2 or np.isnan(rows).all(axis=1).any():
            return None
        rel = np.nanmedian(rows, axis=1) - 1.0
        # (one factor per row: its blocks agree but for the returned amax's own rounding)
        if np.nanmax(np.abs(rows - 1.0 - rel[:, None])) > 2.0 ** -20 or not estimate_like(rel):
            return None
        return rel.reshape(self.amax.shape[:-1] + (1,))

    def q_of(self, num, D, clip=True):
        D = np.broadcast_to(D, self.amax.shape)
        with np.errstate(all="ignore"):
            v = NB.blocked(num, self.B) / D[..., None]
        v = np.where(D[..., None] == 0, 0.0 * NB.blocked(num, self.B), v)
        v = np.clip(v, -self.qmax, self.qmax) if clip else v
        return v.reshape(num.shape[:-1] + (-1,))[..., :self.H]

    def candidates(self):
        out = []
        nd = self.y.ndim
        v_ref, ts_ref = self.v_of(self.amax)
        E_v = np.broadcast_to(np.asarray(self.record.E["outputs"].get("scale", 0.0), dtype=np.float64), v_ref.shape)
        rel = np.where(v_ref > 0, E_v / np.where(v_ref > 0, v_ref, 1.0), 0.0)
        E0 = np.where(v_ref > 0, 0.0, E_v)

        def add(v2, text, mech, f=None, ts=None, amax=None, num=None, scope=None):
            """A candidate whose pre-rounding scale is v2 (the check's bound on v carried relatively), stored by
            the rule ``f`` (default: the configuration's): the stored scales a kernel may return for it span
            [f(v2 - E), f(v2 + E)] (every rule is monotone)."""
            f = f or self.encode
            ts = ts_ref if ts is None else ts
            r, e0 = (rel, E0) if scope is None else (scope(rel), scope(E0))     # the bounds of the blocks it reads
            with np.errstate(all="ignore"):
                lo, hi = f(np.maximum(v2 * (1 - r) - e0, 0.0)), f(v2 * (1 + r) + e0)
            c = {"arrays": {"scale": (lo, hi), "amax": self.amax if amax is None else amax,
                            "tensor_scale": np.full((1,) * nd, float(np.ravel(ts)[0]))},
                 "D": (lo * ts, hi * ts), "text": text, "mech": mech}
            if scope is not None:
                c["E"] = {"amax": scope(E_a)}
            if num is not None:
                c["num"] = num
            out.append(c)

        add(v_ref, "", None)
        out[-1]["reference"] = True

        def from_amax(a, text, num=None, scope=None, mech="quant_scale"):
            v2, ts = self.v_of(a)
            add(v2, text, mech, ts=ts, amax=a, num=num, scope=scope)

        E_a = np.broadcast_to(np.asarray(self.record.E["outputs"].get("amax", 0.0), dtype=np.float64), v_ref.shape)
        nb = self.amax.shape[-1]
        scopes = [(lambda a: np.broadcast_to(np.max(a, initial=0.0), a.shape),
                   "the whole tensor's amax (one amax for every block)")]
        if nb > 1:
            scopes.append((lambda a: np.broadcast_to(np.max(a, axis=-1, keepdims=True), a.shape),
                           "the row's amax (one amax per row, not per block)"))
        for B2 in (16, 32, 64, 128, 256, 512):
            k = B2 // self.B
            if B2 > self.B and B2 % self.B == 0 and B2 < nb * self.B:
                scopes.append((lambda a, k=k: np.repeat(np.max(_pad_to(a, k).reshape(a.shape[:-1] + (-1, k)), axis=-1),
                                                        k, axis=-1)[..., :a.shape[-1]],
                               f"the amax of blocks of {B2} values where the block size {self.B} belongs"))
        for scope, what in scopes:
            from_amax(scope(self.amax), f"is computed from {what}", scope=scope)
        # each block's amax as max(y): the absolute value left out (a negative extreme missed; a block of negative
        # values alone its negative maximum, or 0 where the maximum starts from 0)
        a_s = np.max(NB.blocked(self.y, self.B), axis=-1)
        for a, what in ((a_s, ""), (np.maximum(a_s, 0.0), ", from 0")):
            if not np.array_equal(a, self.amax):
                with np.errstate(all="ignore"):
                    from_amax(a, f"is computed from each block's max(y){what} where max(|y|) belongs (the absolute "
                                 "value left out)")
        est = self.estimated_rows()
        if est is not None:                     # each row's rstd an approximate reciprocal square root
            num = self.y + self.yw * est
            from_amax(self.amax_of(num), f"is computed from y with each row's rstd off by up to "
                                         f"{np.max(np.abs(est)):.1e} relative, on both sides (an approximate "
                                         "reciprocal square root without a Newton step), and q from that y",
                      num=num, mech="precision")
        p = np.arange(self.H) % self.B % 32     # a block's amax by a 32-lane butterfly missing its offset-s step
        for s_ in (16, 8, 4, 2, 1):             # (lane l & s == 0 alone; s = 1: a pair load's first component)
            keep = (p & s_) == 0
            if s_ < self.B and not keep.all():
                a_w = self.amax_of(np.where(keep, self.y, 0.0))
                if not np.array_equal(a_w, self.amax):
                    from_amax(a_w, f"is computed from an amax over the block's lanes l with l & {s_} == 0 alone (a "
                                   f"warp butterfly without its offset-{s_} step"
                              + ("; the first value of each pair)" if s_ == 1 else ")"), mech="block")
        for t, what in self.sources():
            a = self.amax_of(t)
            from_amax(a, f"is computed from the amax of {what}")
            if what.startswith("y rounded"):
                # (y stored in the 16-bit dtype, then quantized: rule 8's precision)
                from_amax(a, f"is computed from the amax of {what}, and q from that rounded y", num=t, mech="precision")
                add(v_ref, "", "precision", num=t)
                out[-1].update(final=True, text=f"the block scale is right, but q is {what} divided by it (an "
                                                "unrounded y belongs)")
        qm, fmt = self.qmax, self.fmt
        S0 = self.zero_block_scale(v_ref)
        if S0:
            add(np.maximum(v_ref, S0), f"is floored at {S0:g} (an all-zero block's scale {S0:g} where "
                                       f"{float(self.encode(np.zeros(1))[0]):g} belongs)", "quant_scale")
        if np.any(v_ref < 1.0):     # the unbiased exponent clamped at 0 (the E8M0 byte's bound before the bias)
            add(np.maximum(v_ref, 1.0), "is clamped below at 1 (its exponent clamped at 0: a block whose scale is "
                                        "below 1 left unscaled)", "quant_scale")
        if fmt == "fp8_group" and self.c["min_scale"] > 0:
            ms = self.c["min_scale"]
            add(self.amax / qm, f"is amax / qmax without its floor min_scale ({ms:g})", "quant_scale")
            add(np.maximum(self.amax, ms) / qm, f"is max(amax, min_scale) / qmax: min_scale ({ms:g}) applied to "
                                                "the amax before the division", "quant_scale")
        if fmt == "mxfp8" and self.rule == "floor":
            emax = NB.ELEMENTS[self.qdtype][2]
            for e2, what in EMAX.items():
                if e2 != emax:
                    add(self.v_of(self.amax, 2.0 ** (emax - e2))[0], f"is amax / 2^{e2}: {what} where {self.qdtype}'s "
                                                                     f"emax {emax} belongs", "quant_scale")
        else:
            div = 6.0 if fmt == "nvfp4" else qm
            for m, what in MAXIMA.items():
                if m != div and m not in FINFO:       # (an activation dtype's max: norm_quant's row context)
                    add(self.v_of(self.amax, div / m)[0], f"divides amax by {m:g}: {what} where {div:g} belongs "
                                                          f"(the factor {div:g}/{m:g})", "quant_scale")
        if fmt == "nvfp4" and self.gs is None:
            g = float(np.max(self.amax, initial=0.0))
            for num_, what in ((448.0, "448 / g: the FP4 maximum 6 left out"),
                               (6.0, "6 / g: E4M3's maximum 448 left out"),
                               (240.0 * 6.0, "240 * 6 / g: E4M3 fnuz's 240 where 448 belongs")):
                if g > 0:
                    v2, ts2 = self.v_of(self.amax, enc=num_ / g)
                    add(v2, f"uses the tensor encode factor {what} (where 448 * 6 / g belongs)", "quant_scale", ts=ts2)
            if nd >= 2 and self.amax.size > self.amax.shape[-1]:
                # the encode factor per row, from the row's own amax (a row-scaled recipe's), each row decoded
                # with its own 1 / S_enc; the tensor_scale output the first row's
                enc_r, ts_r = NB.nvfp4_tensor(np.max(self.amax, axis=-1, keepdims=True))
                add(self.amax / 6.0 * enc_r, "uses an encode factor 448 * 6 / g per row, g the row's own amax (the "
                    "tensor's belongs; the returned tensor scale the first row's)", "quant_scale", ts=ts_r)
            for t, what in self.sources():      # the tensor amax g alone taken from another tensor
                v2, ts2 = self.v_of(self.amax, enc=NB.tensor_encode(self.amax_of(t), self.c, None))
                add(v2, f"uses the tensor encode factor from the amax of {what} (the block amaxes y's)",
                    "quant_scale", ts=ts2)
        if fmt == "nvfp4":      # the E4M3 block scale clamped at another format's maximum before its conversion
            add(v_ref, "is clamped at 240 (E4M3 fnuz's maximum) before its E4M3 conversion, where E4M3's 448 belongs "
                "(the blocks above it saturate there, their values clipped at 6)", "saturation",
                f=lambda v: self.encode(np.minimum(v, 240.0)))
        if fmt == "nvfp4" and self.gs is not None:
            gs = float(np.asarray(self.gs).reshape(()))
            v2, ts2 = self.v_of(self.amax, enc=1.0 / gs)
            add(v2, "uses the reciprocal of the global_scale input (a decode scale where the encode scale "
                    "S_enc belongs)", "quant_scale", ts=ts2)
        if fmt == "nvfp4":
            add(v_ref, "is right, but the tensor scale is its reciprocal (the encode factor S_enc where 1 / S_enc "
                       "belongs)", "quant_scale", ts=1.0 / ts_ref)
            E_ts = float(np.max(self.record.E["outputs"].get("tensor_scale", 0.0)))
            out[-1]["E"] = {"tensor_scale": max(E_ts, E_ts / ts_ref ** 2)}     # the bound carried to 1 / ts
        if fmt in ("mxfp8",) or (fmt, self.rule) == ("fp8_group", "pow2"):
            lo, hi = (NB.E8M0_EXP if fmt == "mxfp8" else NB.F32_POW2_EXP)
            zero = None if fmt == "mxfp8" else 0.0
            rules = [(lambda v: NB.pow2_floor(v, lo, hi), "rounded down to a power of two (the exponent floored)",
                      "scale_rounding"),
                     (lambda v: NB.pow2_ceil(v, lo, hi, zero), "rounded up to a power of two (the exponent rounded up)",
                      "scale_rounding"),
                     (lambda v: _pow2_nearest(v, lo, hi, zero), "rounded to the nearest power of two",
                      "quant_scale")]            # scale_rounding is the direction (mechanisms.py): not this
            if fmt == "fp8_group":
                rules.append((lambda v: v, "not rounded to a power of two (the raw amax / qmax)", "quant_scale"))
            for f, what, mech in rules:
                add(v_ref, f"is {what} where the rule {self.rule!r} belongs", mech, f=f)
            if fmt == "mxfp8":      # the rule's own direction, from the other base (qmax vs 2^emax as the maximum)
                emax = NB.ELEMENTS[self.qdtype][2]
                if self.rule == "floor":
                    add(self.amax / qm, f"is floor(log2(amax / qmax)): the element maximum qmax = {qm:g} where "
                                        f"2^emax = 2^{emax} belongs", "quant_scale", f=rules[0][0])
                else:
                    add(self.amax / 2.0 ** emax, f"is 2^(ceil(log2 amax) - emax): 2^emax = 2^{emax} as the element "
                                                 f"maximum where qmax = {qm:g} belongs", "quant_scale", f=rules[1][0])
        if fmt == "nvfp4":
            grid = _grid((NB.ELEMENTS["float8_e4m3fn"][0], -448.0, 448.0))
            # (the block scale's own rounding rule: rule 5's scale_rounding, before rule 8's rounding)
            add(v_ref, "is converted to float8_e4m3fn toward zero (truncated), not to nearest", "scale_rounding",
                f=lambda v: _grid_round(np.clip(v, -448.0, 448.0), grid, "zero"))
            add(v_ref, "is converted to float8_e4m3fn rounding up (the next value above), not to nearest",
                "scale_rounding", f=lambda v: _grid_round(np.clip(v, -448.0, 448.0), grid, "up"))
            add(v_ref, "is not rounded to float8_e4m3fn (the raw amax / 6 * S_enc)", "quant_scale", f=lambda v: v)
        if (fmt, self.rule) == ("fp8_group", "exact"):
            for d in _low(self.case.dtype):
                add(v_ref, f"is rounded to {d}" + (" (the input dtype)" if d == self.case.dtype else ""), "precision",
                    f=lambda v, d=d: np.asarray(round_to(v, d), dtype=np.float64))
        _common(self, out, add, v_ref)
        return out


def _directed_to(v, d, up):
    """v rounded to the 16-bit dtype ``d`` up (toward +inf) or down (toward -inf), as float64."""
    v = np.asarray(v, dtype=np.float64)
    r = np.asarray(round_to(v, d))                                  # to nearest, in d
    step = np.nextafter(r, np.full_like(r, np.inf if up else -np.inf))
    out = np.where(r.astype(np.float64) < v if up else r.astype(np.float64) > v, step, r).astype(np.float64)
    return np.where(np.isfinite(v), out, v)


def _pad_to(a, k):
    """a (..., n) padded with zeros along its last axis to a multiple of k."""
    pad = (-a.shape[-1]) % k
    return np.concatenate([a, np.zeros(a.shape[:-1] + (pad,))], axis=-1) if pad else np.asarray(a)


def _pow2_nearest(v, lo, hi, zero=None):
    """2^k nearest to v (ties, 1.5 2^k, up), k clipped to [lo, hi]; v = 0: ``zero`` (None: 2^lo)."""
    v = np.asarray(v, dtype=np.float64)
    m, e = np.frexp(np.where(v > 0, v, 1.0))
    k = np.clip(np.where(m >= 0.75, e, e - 1), lo, hi)
    out = np.where(v > 0, np.ldexp(1.0, k.astype(np.int64)), 2.0 ** lo if zero is None else zero)
    return np.where(np.isnan(v), np.nan, out)


def _common(ctx, out, add, ref_s):
    """The candidates both ops share: the reciprocal, a constant factor, and (a passing scale) q divided by
    the reciprocal of the returned scale (multiplied by it)."""
    Dk = ctx.kernel_D()
    if Dk is not None:
        with np.errstate(all="ignore"):
            inv = np.where(Dk > 0, 1.0 / np.where(Dk > 0, Dk, 1.0), 0.0)
        out.append({"arrays": {}, "D": inv, "text": f"the {ctx.what} is right, but q is y multiplied by it (the scale "
                                                    "taken as the inverse scale), not divided", "mech": "quant_scale",
                    "final": True})
        prev, unit = ctx.previous(Dk)
        if np.any(prev != Dk):      # (a scale register still holding the previous row's or block's: rule 12's layout)
            out.append({"arrays": {}, "D": prev, "text": f"the {ctx.what} is right, but q of each {unit} is y divided by "
                                                         f"the previous {unit}'s {ctx.what} (the first {unit} by its "
                                                         f"own: the {ctx.what} read before it was updated)",
                        "mech": "layout", "final": True})
    with np.errstate(all="ignore"):
        rcp = np.where(ref_s > 0, 1.0 / np.where(ref_s > 0, ref_s, 1.0), np.inf)
    add(rcp, "is the reciprocal of the expected one (qmax / amax: the multiplier, where amax / qmax belongs)",
        "quant_scale")
    out[-1]["generic"] = True
    for k in range(-8, 9):
        if k:
            add(ref_s * 2.0 ** k, f"is the expected one times 2^{k}", "quant_scale")
            out[-1]["generic"] = True


def _low(dtype):
    """The 16-bit dtypes a scale may be stored in by mistake, the case dtype first."""
    return tuple(dict.fromkeys(d for d in (dtype, "bfloat16", "float16") if d in ("bfloat16", "float16")))


def _grid(table):
    """The finite values of a quantized dtype, sorted (table: (NumPy dtype, lowest, highest))."""
    dt, lo, hi = table
    if np.dtype(dt).kind == "i":
        return np.arange(int(lo), int(hi) + 1, dtype=np.float64)
    allv = np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)
    return np.unique(allv[np.isfinite(allv)])


def _grid_round(v, grid, mode):
    """v (clipped to the grid's range) rounded onto the sorted ``grid`` toward zero (``mode`` "zero"), down
    ("down", floor), up ("up", ceil) or to nearest with ties away from zero ("away"); NaN stays NaN."""
    v = np.clip(np.asarray(v, dtype=np.float64), grid[0], grid[-1])
    w = np.where(np.isnan(v), 0.0, v)
    i = np.clip(np.searchsorted(grid, w, side="right") - 1, 0, grid.size - 1)
    down = grid[i]                                                      # the grid value at or below
    up = np.where(down < w, grid[np.minimum(i + 1, grid.size - 1)], down)
    if mode in ("zero", "down", "up"):
        out = np.where(w >= 0, down, up) if mode == "zero" else down if mode == "down" else up
    else:
        out = np.where((up - w < w - down) | ((up - w == w - down) & (w > 0)), up, down)
    return np.where(np.isnan(v), np.nan, out)


def _nonsat(v, dt):
    """v converted to the float8 dtype ``dt`` without saturation (one rounding), as float64: NaN or inf beyond
    its largest value."""
    from ..norms._rounding import float32_odd
    return float32_odd(v).astype(dt).astype(np.float64)
