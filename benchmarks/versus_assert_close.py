"""Issue 35: refnorm against ``torch.testing.assert_close`` at the tolerances kernel projects publish in
their own normalization tests. Over seeded random trials, each judge (refnorm's
``assert_close_to_reference``, strict contract; assert_close at each published tolerance) judges a
correct float32-internal kernel (every alarm is a false alarm) and the same kernel with one planted bug
(every pass is a miss).

    python benchmarks/versus_assert_close.py [--trials 3000] [--first-seed 100000] [--max-elements 65536]
                                             [--write docs/versus_assert_close.md]

(3000 trials: about 3-4 minutes on 2 cores. ``--write`` puts the tables between the file's
``<!-- BEGIN RESULTS -->`` and ``<!-- END RESULTS -->`` markers.)

Trial ``seed``: op (layer_norm, rms_norm), dtype (float32, float16, bfloat16), regime (normal,
mean-shifted, small std, outliers), shape rows x features (log-uniform in 1..1024 x 64..4096, rows cut
so that rows * features <= ``--max-elements``), all drawn from ``numpy.random.default_rng(seed)``; the
inputs x, weight, bias, dy are drawn in float32 and rounded to the dtype, as a kernel receives them.
Every array the kernel returns is judged: y, dx, dweight and (layer_norm) dbias.

The kernel (``kernel``) computes in float32 from the dtype inputs (two-pass pairwise statistics,
rstd = 1/sqrt(var + eps), hand-written backward, parameter sums pairwise over the rows) and rounds each
result once to the dtype: the kernel of tests/planted/emulated.py, on rows. ``BUGS`` plants one change
each, in the ops and dtypes where it is a bug (a rounding to the dtype is none in float32). A bug whose
arrays come out bit-identical to the correct kernel's on a trial (a tail that does not exist, dweight
partials on 32 rows or fewer, a one-pass variance that rounds the same) did not happen there: that trial
is left out of the bug's detection rate and counted as "not manifest".

assert_close's reference is torch float64 autograd on the same inputs (F.layer_norm / F.rms_norm),
cast to the dtype: the most accurate reference such a test can have (the projects' own references are
torch in the dtype or a float32 upcast, each less accurate; docs/versus_assert_close.md says which).
refnorm's reference and bound are its own (float64 NumPy, docs/tolerances.md).
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

OPS = ("layer_norm", "rms_norm")
DTYPES = ("float32", "float16", "bfloat16")
REGIMES = ("normal", "mean_shifted", "small_std", "outliers")
EPS = {"layer_norm": 1e-5, "rms_norm": 1e-6}
TAIL_BLOCK = 256          # drop_tail: the statistics loop over blocks of this many features
DW_TILE = 32              # dw_partials_in_d: rows per float32 partial of dweight / dbias

HALF = ("float16", "bfloat16")
# planted bug -> (what it changes, the ops it applies to, the dtypes it is a bug in: a rounding to the input
# dtype is none in float32, where dw_partials_in_d is only another summation order)
BUGS = {
    "one_pass": ("var = max(0, sum(x^2)/n - mean^2) in float32 (one pass, no centring)", ("layer_norm",), DTYPES),
    "eps_outside": ("rstd = 1/(sqrt(var) + eps): eps outside the square root", OPS, DTYPES),
    "dw_partials_in_d": (f"dweight (and dbias): float32 partials of {DW_TILE} rows each, accumulated serially "
                         "in the input dtype", OPS, HALF),
    "rstd_in_d": ("rstd rounded to the input dtype before it is used", OPS, HALF),
    "xhat_in_d": ("x_hat rounded to the input dtype before the weight multiplies it", OPS, HALF),
    "drop_tail": (f"the statistics' reduction skips the last block of {TAIL_BLOCK} features when it is partial "
                  "(the divisor still n)", OPS, DTYPES),
    "ddof1": ("variance (layer_norm) or mean of squares (rms_norm) divided by n - 1", OPS, DTYPES),
}


# ---------------------------------------------------------------------------------------- judges
def _torch_default(dtype):
    return {"float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}[dtype]


def _apex(op, dtype, array):
    """apex tests/L0/run_fused_layer_norm/test_fused_layer_norm.py: None (torch's defaults) unless set."""
    fwd = array == "y"
    if dtype == "bfloat16":          # TestFusedLayerNormElemWiseBFloat16, TestAutocastFused*Norm bf16
        return (1.6e-2, 3e-4) if fwd else (1.6e-2, 3e-3)
    if op == "rms_norm" and not fwd:  # TestFusedRMSNormElemWise(Half).bwd_thresholds
        return (2e-3, 2e-4) if dtype == "float32" else (1.6e-2, 3e-3)
    return _torch_default(dtype)


def _liger(op, dtype, array):
    """Liger-Kernel test/transformers/test_rms_norm.py: (float32, atol 1e-4, rtol 1e-6), (bfloat16, 2e-1,
    2e-2); it tests no float16 and this judge is for its RMSNorm only."""
    if op != "rms_norm" or dtype == "float16":
        return None
    return (1e-6, 1e-4) if dtype == "float32" else (2e-2, 2e-1)


# name -> (source, tolerance(op, dtype, array) -> (rtol, atol) or None where the source has none)
JUDGES = {
    "torch defaults": ("torch.testing.assert_close's defaults per dtype; TransformerEngine "
                       "tests/pytorch/test_numerics.py dtype_tols", lambda op, d, a: _torch_default(d)),
    "apex": ("NVIDIA/apex tests/L0/run_fused_layer_norm/test_fused_layer_norm.py", _apex),
    "Triton tutorial": ("triton-lang/triton python/tutorials/05-layer-norm.py: atol=1e-2, rtol=0",
                        lambda op, d, a: (0.0, 1e-2)),
    "vLLM": ("vllm-project/vllm tests/kernels/core/test_layernorm.py: atol=1e-2, rtol=1e-2",
             lambda op, d, a: (1e-2, 1e-2)),
    "Liger": ("linkedin/Liger-Kernel test/transformers/test_rms_norm.py", _liger),
}


# ---------------------------------------------------------------------------------------- trials
def trial(seed, max_elements=65536, **fixed):
    """The trial of ``seed``: a dict with op, dtype, regime, rows, n, eps and the inputs x, weight,
    (bias), dy as NumPy arrays in the dtype. ``fixed`` (op=, dtype=, regime=, rows=, n=) overrides a draw
    (the draw is still made: the rest of the trial stays the seed's)."""
    import ml_dtypes
    nd = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
    rng = np.random.default_rng(seed)
    op, dtype, regime = OPS[rng.integers(2)], DTYPES[rng.integers(3)], REGIMES[rng.integers(4)]
    n = int(round(2 ** rng.uniform(6, 12)))
    rows = int(round(2 ** rng.uniform(0, 10)))
    unknown = set(fixed) - {"op", "dtype", "regime", "rows", "n"}
    if unknown:
        raise ValueError(f"trial: unknown override(s) {sorted(unknown)}; expected op, dtype, regime, rows, n")
    op, dtype, regime = fixed.get("op", op), fixed.get("dtype", dtype), fixed.get("regime", regime)
    n = fixed.get("n", n)
    rows = fixed.get("rows", max(1, min(rows, max_elements // n)))
    z = rng.standard_normal((rows, n), dtype=np.float32)
    if regime == "mean_shifted":          # |mean| / std in 1e2..1e3, per row
        std = np.float32(2 ** rng.uniform(-2, 2))
        mean = std * 10 ** rng.uniform(2, 3, (rows, 1)) * rng.choice([-1, 1], (rows, 1))
        x = (mean + std * z).astype(np.float32)
    elif regime == "small_std":           # std 1e-4..1e-2: var near or below eps
        x = z * np.float32(10 ** rng.uniform(-4, -2))
    elif regime == "outliers":            # ~0.5% of the elements 1e2..1e3 x the rest
        hit = rng.random((rows, n)) < 0.005
        x = np.where(hit, z * np.float32(10 ** rng.uniform(2, 3)), z).astype(np.float32)
    else:
        x = z
    t = {"seed": seed, "op": op, "dtype": dtype, "regime": regime, "rows": rows, "n": n, "eps": EPS[op]}
    t["x"] = x.astype(nd[dtype])
    t["weight"] = (1 + 0.5 * rng.standard_normal(n, dtype=np.float32)).astype(nd[dtype])
    if op == "layer_norm":
        t["bias"] = (0.5 * rng.standard_normal(n, dtype=np.float32)).astype(nd[dtype])
    t["dy"] = rng.standard_normal((rows, n), dtype=np.float32).astype(nd[dtype])
    return t


# ---------------------------------------------------------------------------------------- the kernel
def kernel(t, bug=None):
    """The float32-internal kernel on trial ``t`` with the planted ``bug`` (None: correct). Returns
    {"y", "dx", "dweight"[, "dbias"]} as NumPy arrays in the trial's dtype."""
    from refnorm.check.precision import NP, round_to
    f32, d = np.float32, t["dtype"]

    def q(v):              # round to the dtype, kept in float32 (float32 trials: no-op)
        return np.asarray(v, f32).astype(NP[d]).astype(f32)

    def psum(a, axis):     # NumPy's pairwise float32 sum along a contiguous axis
        a = np.ascontiguousarray(a if axis == 1 else a.T, dtype=f32)
        return a.sum(axis=1, dtype=f32, keepdims=True) if axis == 1 else a.sum(axis=1, dtype=f32)

    centered = t["op"] == "layer_norm"
    x, w, dy = (np.asarray(t[k], f32) for k in ("x", "weight", "dy"))
    m, n = x.shape
    eps = f32(t["eps"])
    xs = x
    if bug == "drop_tail" and n > TAIL_BLOCK and n % TAIL_BLOCK:
        xs = x[:, :n - n % TAIL_BLOCK]
    div = f32(n - 1 if bug == "ddof1" else n)
    with np.errstate(all="ignore"):
        if centered:
            mean = psum(xs, 1) / f32(n)
            if bug == "one_pass":
                var = np.maximum(psum(xs * xs, 1) / f32(n) - mean * mean, f32(0))
            else:
                dev = xs - mean
                var = psum(dev * dev, 1) / div
        else:
            mean = np.zeros((m, 1), f32)
            var = psum(xs * xs, 1) / div
        rstd = f32(1) / (np.sqrt(var) + eps) if bug == "eps_outside" else f32(1) / np.sqrt(var + eps)
        if bug == "rstd_in_d":
            rstd = q(rstd)
        xhat = (x - mean) * rstd
        if bug == "xhat_in_d":
            xhat = q(xhat)
        y = xhat * w
        if centered:
            y = y + np.asarray(t["bias"], f32)
        g = dy * w
        proj = psum(g * xhat, 1) / f32(n)
        dx = rstd * (g - psum(g, 1) / f32(n) - xhat * proj) if centered else rstd * (g - xhat * proj)
        terms = {"dweight": dy * xhat, "dbias": dy} if centered else {"dweight": dy * xhat}
        grads = {}
        for name, T in terms.items():
            if bug == "dw_partials_in_d":
                acc = np.zeros(n, f32)
                for r0 in range(0, m, DW_TILE):
                    acc = q(acc + psum(T[r0:r0 + DW_TILE], 0))
                grads[name] = acc
            else:
                grads[name] = psum(T, 0)
    out = {"y": y, "dx": dx, **grads}
    return {k: round_to(np.asarray(v, np.float64), d) for k, v in out.items()}


# ---------------------------------------------------------------------------------------- judging
def torch_reference(t):
    """torch float64 autograd on the trial's inputs: ({array: float64 NumPy}, {array: torch tensor cast to
    the dtype})."""
    import torch
    F = torch.nn.functional
    td = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[t["dtype"]]
    names = ["x", "weight"] + (["bias"] if t["op"] == "layer_norm" else [])
    ts = {k: torch.from_numpy(np.asarray(t[k], np.float64)).requires_grad_() for k in names}
    n = t["n"]
    if t["op"] == "layer_norm":
        y = F.layer_norm(ts["x"], (n,), ts["weight"], ts["bias"], t["eps"])
    else:
        y = F.rms_norm(ts["x"], (n,), ts["weight"], t["eps"])
    y.backward(torch.from_numpy(np.asarray(t["dy"], np.float64)))
    ref = {"y": y.detach(), "dx": ts["x"].grad, "dweight": ts["weight"].grad}
    if "bias" in ts:
        ref["dbias"] = ts["bias"].grad
    return {k: v.detach().numpy() for k, v in ref.items()}, {k: v.to(td) for k, v in ref.items()}


def assert_close_alarm(out, ref, t, tolerance):
    """True when torch.testing.assert_close raises on some array, False when it passes on every one,
    None when the source publishes no tolerance for this op and dtype."""
    import torch
    td = ref["y"].dtype
    for name, r in ref.items():
        tol = tolerance(t["op"], t["dtype"], name)
        if tol is None:
            return None
        got = torch.from_numpy(np.asarray(out[name], np.float32)).to(td)
        try:
            torch.testing.assert_close(got, r, rtol=tol[0], atol=tol[1])
        except AssertionError:
            return True
    return False


def refnorm_verdict(out, t):
    """"failed" (an alarm), "verified" (every array verified) or "unverified" (none failed, but some
    array's bound verified nothing: refnorm says so, and it is not a pass of that array)."""
    from refnorm.testing import assert_close_to_reference
    inputs = {k: t[k] for k in ("x", "weight", "bias") if k in t}
    grads = {"x": out["dx"], "weight": out["dweight"]}
    if "dbias" in out:
        grads["bias"] = out["dbias"]
    try:
        arrays = assert_close_to_reference(t["op"], inputs, {"y": out["y"]}, config={
            "normalized_shape": [t["n"]], "eps": t["eps"]}, cotangents={"y": t["dy"]}, grads=grads,
            allow_partial=True)
    except AssertionError:
        return "failed"
    return "unverified" if any(a.verdict == "unconstrained" for a in arrays) else "verified"


ULP = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}   # at 1: the spacing above 1


def relative_change(a, b, ref64):
    """{array: max |a - b| / max |ref64|} (inf where a and b disagree on a NaN)."""
    out = {}
    for k in ref64:
        d = np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64))
        worst = float(d.max()) if d.size else 0.0
        scale = float(np.max(np.abs(ref64[k]))) if ref64[k].size else 0.0
        out[k] = np.inf if np.isnan(d).any() else worst / scale if scale else np.inf if worst else 0.0
    return out


def change_ulps(bug_out, correct, ref64, dtype):
    """The bug's largest change to any array, in ulps of the dtype at that array's scale (max |reference|)."""
    return max(relative_change(bug_out, correct, ref64).values()) / ULP[dtype]


def judge_trial(t, bugs=tuple(BUGS)):
    """One trial: {kernel: {judge: alarm}} for "correct" and each bug that applies to the op and dtype
    and manifests (``None``: it did not manifest); refnorm's alarm is ``verdict == "failed"`` and its
    verdict is kept under "refnorm verdict"; a bug's row keeps the size of its change, ``change_ulps``."""
    ref64, ref = torch_reference(t)
    correct = kernel(t)
    res = {}
    for name in ("correct",) + tuple(b for b in bugs if t["op"] in BUGS[b][1] and t["dtype"] in BUGS[b][2]):
        out = correct if name == "correct" else kernel(t, name)
        if name != "correct" and all(np.array_equal(out[k], correct[k], equal_nan=True) for k in out):
            res[name] = None
            continue
        v = refnorm_verdict(out, t)
        row = {"refnorm": v == "failed", "refnorm verdict": v,
               "change_ulps": 0.0 if name == "correct" else change_ulps(out, correct, ref64, t["dtype"])}
        for j, (_, tol) in JUDGES.items():
            row[j] = assert_close_alarm(out, ref, t, tol)
        res[name] = row
    return res


# ---------------------------------------------------------------------------------------- tables
def tally(results):
    """results: [(trial, judge_trial(...))] -> {(kernel, judge, group): [alarms, judged]} for the groups
    "all", each dtype and each regime, and "clean": all dtypes, only the trials on which that judge
    raised no alarm on the correct kernel (a bug flagged where the correct kernel is flagged too tells
    nothing); and {(kernel, group): trials where it did not manifest}; refnorm's
    "unverified" counts under (kernel, "refnorm unverified", group)."""
    counts, silent = {}, {}
    for t, res in results:
        for kern, row in res.items():
            for dt in (t["dtype"], t["regime"], "all"):
                if row is None:
                    silent[(kern, dt)] = silent.get((kern, dt), 0) + 1
                    continue
                for j in ("refnorm",) + tuple(JUDGES):
                    if row[j] is None:
                        continue
                    for g in (dt, "clean") if dt == "all" and not res["correct"][j] else (dt,):
                        c = counts.setdefault((kern, j, g), [0, 0])
                        c[0] += bool(row[j])
                        c[1] += 1
                c = counts.setdefault((kern, "refnorm unverified", dt), [0, 0])
                c[0] += row["refnorm verdict"] == "unverified"
                c[1] += 1
    return counts, silent


def _pct(c):
    """[alarms, judged] -> "12.3% (37/300)" ("0.067%" below 1%, "0%" and "100%" exact); "-": none judged."""
    if not c or not c[1]:
        return "-"
    a, n = c
    p = 100 * a / n
    text = f"{p:.0f}%" if a in (0, n) else f"{p:.2g}%" if p < 1 else f"{p:.1f}%"
    return f"{text} ({a}/{n})"


def regime_table(counts, kern="correct"):
    """Alarms on ``kern`` per regime (rows: judges)."""
    lines = ["| judge | " + " | ".join(REGIMES) + " |", "|" + "---|" * (1 + len(REGIMES))]
    for j in ("refnorm",) + tuple(JUDGES):
        lines.append(f"| {j} | " + " | ".join(_pct(counts.get((kern, j, r))) for r in REGIMES) + " |")
    return "\n".join(lines)


def markdown_table(counts, dtype="all", bugs=tuple(BUGS)):
    judges = ("refnorm",) + tuple(JUDGES)
    head = "| judge | false alarms (correct kernel) | " + " | ".join(f"`{b}`" for b in bugs) + " |"
    lines = [head, "|" + "---|" * (2 + len(bugs))]
    for j in judges:
        cells = [_pct(counts.get(("correct", j, dtype)))] + [_pct(counts.get((b, j, dtype))) for b in bugs]
        lines.append(f"| {j} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine():
    import torch
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, torch {torch.__version__}, "
            f"NumPy {np.__version__}")


def run(seeds, max_elements=65536, bugs=tuple(BUGS), progress=False):
    results = []
    t0 = time.perf_counter()
    for i, s in enumerate(seeds):
        t = trial(s, max_elements)
        results.append(({k: t[k] for k in ("seed", "op", "dtype", "regime", "rows", "n")}, judge_trial(t, bugs)))
        if progress and (i + 1) % 100 == 0:
            print(f"{i + 1} trials, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return results, time.perf_counter() - t0


def report(results, seconds, args):
    counts, silent = tally(results)
    n = len(results)
    mix = {}
    for t, _ in results:
        for key in ("op", "dtype", "regime"):
            mix.setdefault(key, {}).setdefault(t[key], 0)
            mix[key][t[key]] += 1
    out = [f"Trials: {n} (seeds {args.first_seed}..{args.first_seed + n - 1}), "
           f"{seconds:.0f} s; {machine()}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
           "Mix: " + "; ".join(", ".join(f"{k} {v}" for k, v in sorted(d.items())) for d in mix.values()) + ".",
           "", "All dtypes:", "", markdown_table(counts)]
    for dt in DTYPES:
        out += ["", f"{dt}:", "", markdown_table(counts, dt)]
    out += ["", "Detection on the trials where that judge passed the correct kernel (all dtypes; the first "
            "column: the correct kernel's alarms there, 0 by construction):", "", markdown_table(counts, "clean")]
    out += ["", "False alarms on the correct kernel per regime (all dtypes):", "", regime_table(counts)]
    sizes = {}
    for _, res in results:
        for k, row in res.items():
            if row and k != "correct":
                sizes.setdefault(k, []).append(row["change_ulps"])
    out += ["", "Size of each bug's change (its largest change to any array, in ulps of the dtype at that array's "
            "scale; median and 10th percentile over the trials where it manifests): " + ", ".join(
                f"{b} {np.median(sizes[b]):.3g} ({np.percentile(sizes[b], 10):.3g})" for b in BUGS if b in sizes)]
    out += ["", "refnorm 'unverified' (no array failed, but some array's bound verified nothing): " + ", ".join(
        f"{k} {_pct(counts.get((k, 'refnorm unverified', 'all')))}" for k in ("correct",) + tuple(BUGS)),
        "Not manifest (bit-identical to the correct kernel, left out): " + ", ".join(
        f"{b} {silent.get((b, 'all'), 0)}" for b in BUGS)]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=3000)
    p.add_argument("--first-seed", type=int, default=100000)
    p.add_argument("--max-elements", type=int, default=65536)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--write", help="a Markdown file: the tables go between its BEGIN/END RESULTS markers")
    a = p.parse_args(argv)
    begin, end = "<!-- BEGIN RESULTS -->", "<!-- END RESULTS -->"
    if a.write:                       # checked before the run, not after it
        with open(a.write) as f:
            doc = f.read()
        if begin not in doc or end not in doc:
            raise SystemExit(f"{a.write}: no {begin} ... {end} markers to write the results between")
    import torch
    torch.set_num_threads(a.threads)
    results, seconds = run(range(a.first_seed, a.first_seed + a.trials), a.max_elements, progress=True)
    text = report(results, seconds, a)
    print(text)
    if a.write:
        with open(a.write) as f:
            doc = f.read()
        cmd = "python benchmarks/versus_assert_close.py " + " ".join(argv if argv is not None else sys.argv[1:])
        doc = doc[:doc.index(begin) + len(begin)] + f"\n`{cmd}`\n\n{text}\n" + doc[doc.index(end):]
        with open(a.write, "w") as f:
            f.write(doc)


if __name__ == "__main__":
    main()
