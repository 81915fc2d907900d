"""False alarms of refnorm's judge on correct kernels (issue 32): over seeded random trials, two correct
kernels of layer_norm and rms_norm, forward and backward, are judged by ``refnorm.testing.
assert_close_to_reference`` (strict contract); every "failed" is a false alarm.

    python benchmarks/false_alarms.py [--trials 2000] [--first-seed 0] [--max-elements 1048576]
                                      [--processes 2] [--write docs/tolerances.md]

The kernels:
- ``rounded``: refnorm's float64 reference rounded once to the dtype (precision.round_to): the best answer
  there is, which the bias test once failed on mean-shifted bfloat16 rms_norm rows;
- ``emulated``: the float32-internal kernel of benchmarks/versus_assert_close.py (float64 internals for
  float64 trials), every result rounded once to the dtype.

Trial ``seed``: op (layer_norm, rms_norm), dtype (float64, float32, float16, bfloat16), regime (normal,
mean-shifted |mean|/std 1e2..1e3, small std 1e-4..1e-2, outliers), shape rows x features log-uniform in
1..4096 x 64..5120, rows cut so that rows * features <= ``--max-elements``; inputs drawn with
``numpy.random.default_rng(seed)`` (versus_assert_close.trial's draw, widened to these shapes and dtypes).
Printed: alarms per kernel, dtype and regime, the largest bias figure and ratio (error / bound) seen,
and the command, machine and time. ``--write``: the results between the file's
``<!-- BEGIN FALSE ALARMS -->`` and ``<!-- END FALSE ALARMS -->`` markers.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]

OPS = ("layer_norm", "rms_norm")
DTYPES = ("float64", "float32", "float16", "bfloat16")
REGIMES = ("normal", "mean_shifted", "small_std", "outliers")
KERNELS = ("rounded", "emulated")
BEGIN, END = "<!-- BEGIN FALSE ALARMS -->", "<!-- END FALSE ALARMS -->"


def trial(seed, max_elements=1 << 20):
    """The trial of ``seed`` (module docstring): versus_assert_close.trial's dict for a drawn op, dtype,
    regime and shape (float64 trials: its inputs drawn as float32 and kept in float64)."""
    import versus_assert_close as V
    rng = np.random.default_rng([seed, 32])
    op, dtype, regime = OPS[rng.integers(2)], DTYPES[rng.integers(4)], REGIMES[rng.integers(4)]
    n = int(round(2 ** rng.uniform(6, np.log2(5120))))
    rows = max(1, min(int(round(2 ** rng.uniform(0, 12))), max_elements // n))
    t = V.trial(seed, op=op, dtype="float32" if dtype == "float64" else dtype, regime=regime, rows=rows, n=n)
    if dtype == "float64":
        t = {k: (np.asarray(v, np.float64) if isinstance(v, np.ndarray) else v) for k, v in t.items()}
        t["dtype"] = "float64"
    return t


def reference(t):
    """refnorm's float64 reference of the trial: {"y", "dx", "dweight"[, "dbias"]}."""
    from refnorm.check.judge import reference as ref_of
    inputs = {k: t[k] for k in ("x", "weight", "bias") if k in t}
    ref = ref_of(t["op"], {"normalized_shape": [t["n"]], "eps": t["eps"]}, True, inputs, {"y": t["dy"]}, {})
    out = {"y": ref.outputs["y"], "dx": ref.grads["x"], "dweight": ref.grads["weight"]}
    if "bias" in t:
        out["dbias"] = ref.grads["bias"]
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


def rounded(t):
    """refnorm's float64 reference of the trial rounded once to its dtype."""
    from refnorm.check.precision import round_to
    return {k: round_to(v, t["dtype"]) for k, v in reference(t).items()}


def emulated(t):
    """The kernel of versus_assert_close.kernel (two-pass pairwise statistics, rstd = 1/sqrt(var + eps), the
    hand-written backward, parameter sums pairwise over the rows) computed in float32 (float64 for float64
    trials: the strict contract's internals) from the dtype inputs, each result rounded once to the dtype."""
    from refnorm.check.precision import round_to
    f = np.float64 if t["dtype"] == "float64" else np.float32
    x, w, dy = (np.asarray(t[k], f) for k in ("x", "weight", "dy"))
    n, eps = f(t["n"]), f(t["eps"])
    centred = "bias" in t
    mean = x.sum(axis=1, dtype=f, keepdims=True) / n if centred else np.zeros((x.shape[0], 1), f)
    var = ((x - mean) ** 2).sum(axis=1, dtype=f, keepdims=True) / n
    rstd = f(1) / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    y = xhat * w + (np.asarray(t["bias"], f) if centred else f(0))
    g = dy * w
    proj = (g * xhat).sum(axis=1, dtype=f, keepdims=True) / n
    gmean = g.sum(axis=1, dtype=f, keepdims=True) / n if centred else f(0)
    out = {"y": y, "dx": rstd * (g - gmean - xhat * proj),
           "dweight": np.ascontiguousarray((dy * xhat).T).sum(axis=1, dtype=f)}
    if centred:
        out["dbias"] = np.ascontiguousarray(dy.T).sum(axis=1, dtype=f)
    return {k: round_to(np.asarray(v, np.float64), t["dtype"]) for k, v in out.items()}


def judge(out, t):
    """(verdict, largest bias figure, largest ratio) of one kernel's arrays on trial ``t``."""
    from refnorm.testing import assert_close_to_reference
    inputs = {k: t[k] for k in ("x", "weight", "bias") if k in t}
    grads = {"x": out["dx"], "weight": out["dweight"], **({"bias": out["dbias"]} if "dbias" in out else {})}
    try:
        arrays = assert_close_to_reference(t["op"], inputs, {"y": out["y"]}, config={
            "normalized_shape": [t["n"]], "eps": t["eps"]}, cotangents={"y": t["dy"]}, grads=grads,
            allow_partial=True)
    except AssertionError as e:
        return "failed: " + str(e).splitlines()[0][:300], np.nan, np.nan
    return "passed", max(a.bias for a in arrays), max(a.ratio for a in arrays)


def one(args):
    """Both kernels on the trial of ``seed``: [(seed, op, dtype, regime, shape, kernel, verdict, bias, ratio)]."""
    seed, max_elements = args
    t = trial(seed, max_elements)
    key = (seed, t["op"], t["dtype"], t["regime"], f"{t['rows']}x{t['n']}")
    return [key + (name, *judge(make(t), t)) for name, make in (("rounded", rounded), ("emulated", emulated))]


def run(seeds, max_elements=1 << 20, processes=1):
    """The results of the trials ``seeds`` (``one``'s rows, in seed order)."""
    jobs = [(s, max_elements) for s in seeds]
    if processes <= 1:
        return [r for j in jobs for r in one(j)]
    with ProcessPoolExecutor(processes) as pool:
        return [r for rows in pool.map(one, jobs, chunksize=4) for r in rows]


def report(rows, seconds, argv):
    """Markdown: the command, the machine, alarms per kernel x dtype and per regime, the worst figures."""
    import numpy
    alarms = [r for r in rows if r[6] != "passed"]
    by = defaultdict(lambda: [0, 0])
    for r in rows:
        for k in ((r[5], r[2]), (r[5], r[3])):
            by[k][0] += r[6] != "passed"
            by[k][1] += 1
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    ok = [r for r in rows if r[6] == "passed"]
    lines = [f"`python benchmarks/false_alarms.py {' '.join(argv)}`", "",
             f"Machine: {cpu}, {os.cpu_count()} CPUs; Python {platform.python_version()}, NumPy {numpy.__version__}; "
             f"{seconds:.0f} s. Trials: {len(rows) // 2} (seeds {rows[0][0]}..{rows[-1][0]}), each judged for both "
             f"kernels: **{len(alarms)} false alarms** in {len(rows)} judgements.", "",
             "| kernel | " + " | ".join(DTYPES) + " | " + " | ".join(REGIMES) + " |",
             "|---|" + "---|" * (len(DTYPES) + len(REGIMES))]
    for k in KERNELS:
        cells = [f"{by[(k, c)][0]}/{by[(k, c)][1]}" for c in DTYPES + REGIMES]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines += ["", "Cells: alarms / trials judged. Worst figures over the passing judgements: bias figure "
              f"{max((r[7] for r in ok), default=0):.3g} (fails above 1), error / bound "
              f"{max((r[8] for r in ok), default=0):.3g}."]
    lines += [f"- alarm: seed {r[0]} {r[1]} {r[2]} {r[3]} {r[4]} {r[5]}: {r[6]}" for r in alarms[:20]]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--max-elements", type=int, default=1 << 20)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--write", help="a Markdown file with the BEGIN/END FALSE ALARMS markers")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(range(a.first_seed, a.first_seed + a.trials), a.max_elements, a.processes)
    text = report(rows, time.perf_counter() - t0, argv)
    print(text)
    if a.write:
        with open(a.write) as f:
            doc = f.read()
        if BEGIN not in doc or END not in doc:
            raise SystemExit(f"{a.write}: no {BEGIN} ... {END} markers")
        head, rest = doc.split(BEGIN, 1)
        with open(a.write, "w") as f:
            f.write(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])
    return 1 if any(r[6] != "passed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
