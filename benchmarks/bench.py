"""refnorm against torch float64 autograd on the CPU: forward + backward, time and peak memory.

    python benchmarks/bench.py                 # everything: about 5 minutes on 2 idle cores
    python benchmarks/bench.py --quick         # timings only, 3 samples per library: about 30 s
    python benchmarks/bench.py --only layer_norm --repeats 11
    python benchmarks/bench.py --threads 1     # torch and refnorm both single-threaded
    python benchmarks/bench.py --markdown      # the table as Markdown (docs/performance.md)
    python benchmarks/bench.py --numpy         # refnorm without its compiled kernels (same bits)
    REFNORM_POOL_MB=0 python benchmarks/bench.py   # refnorm without its output pool (fresh pages)

What is timed, per case (shapes from issue 7, plus group/instance/rms norm on comparable shapes):
* refnorm: ``refnorm.evaluate(op, {"x", "weight", "bias"}, config, grad_outputs={"y": dy})``, i.e.
  the forward and the gradients of x, weight and bias, all outputs in float64, as a user calls it.
* torch: ``F.<op>(x, ..., weight, bias)`` on float64 leaf tensors with requires_grad, then
  ``y.backward(dy)`` (x.grad, weight.grad, bias.grad), the grads reset to None before each call.
Both run in this process on the same arrays (the tensors share the NumPy inputs' memory), with the
same number of threads: torch.set_num_threads(T) and REFNORM_NUM_THREADS=T, T = --threads, default
the CPUs this process may use. After ``--warmup`` untimed calls, each library is sampled
``--repeats`` times, alternately; a sample is the mean time per call over >= 0.2 s of back-to-back
calls. The median sample is reported (the minimum too); the ratio is refnorm / torch.
The machine may be shared: a sample during which other processes kept more than 0.1 CPU busy
(from /proc/stat) is retaken after a pause (at most 20 times per case; "busy" in the table).
Each case is also checked: refnorm's and torch's y and gradients must agree to 1e-12 relative.

Peak memory (not in --quick): each case runs again in fresh subprocesses (refnorm twice, torch once)
that build the inputs, make a warm-up call on the first 1/16 of the batch (code paths loaded,
refnorm's per-thread work buffers not yet at full size, so they are counted), reset the kernel's
resident-set high-water mark (``echo 5 > /proc/self/clear_refs``) and report VmHWM minus VmRSS
before one forward+backward call, outputs included (the caller's inputs are not counted): what the
call really adds to the process, the same measure for both libraries. For refnorm, tracemalloc's
peak over one call (NumPy reports its allocations to tracemalloc) is given too. Both are divided
by the size of x. Without /proc (not Linux) the figures are left out.

Commands (not in --quick): ``refnorm.golden.commands.build`` into a temporary directory (in this
process) and ``refnorm check --backend torch-cpu --expect-failures known_failures/torch-cpu.txt
--no-progress`` (a subprocess, wall clock, started from the repository root).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="3 repeats after 1 warm-up, no memory subprocesses, no golden build / check")
    p.add_argument("--repeats", type=int, help="timed samples per library and case (default 7; 3 with --quick)")
    p.add_argument("--warmup", type=int, help="untimed calls first (default 2; 1 with --quick)")
    p.add_argument("--threads", type=int, default=_default_threads(),
                   help="threads for torch and for refnorm (default: the CPUs this process may use)")
    p.add_argument("--only", action="append", default=[],
                   help="run the cases whose name contains this (repeatable)")
    p.add_argument("--memory", dest="memory", action="store_true", default=None, help="measure peak memory")
    p.add_argument("--no-memory", dest="memory", action="store_false")
    p.add_argument("--commands", dest="commands", action="store_true", default=None,
                   help="time golden build and refnorm check")
    p.add_argument("--no-commands", dest="commands", action="store_false")
    p.add_argument("--numpy", action="store_true",
                   help="refnorm without its compiled kernels (REFNORM_NATIVE=0): the plain NumPy path")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--json", metavar="PATH", help="also write every figure to PATH")
    p.add_argument("--child", nargs=3, metavar=("LIBRARY", "CASE", "MODE"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.repeats = a.repeats or (3 if a.quick else 7)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 2)
    a.memory = (not a.quick) if a.memory is None else a.memory
    a.commands = (not a.quick) if a.commands is None else a.commands
    return a


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:            # before NumPy / torch start their thread pools
    os.environ["REFNORM_NUM_THREADS"] = str(ARGS.threads)
    if ARGS.numpy:
        os.environ["REFNORM_NATIVE"] = "0"

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
except ImportError:                     # pragma: no cover
    sys.exit("benchmarks/bench.py compares with torch: install its CPU build first "
             "(pip install torch==2.13.0, as the tox 'torch' environment does)")

import refnorm  # noqa: E402

# --------------------------------------------------------------------------------------- cases
# name -> (op, x shape, refnorm config, parameter shape, torch call (x, w, b) -> y)
CASES = {
    "layer_norm 4096x1024": ("layer_norm", (4096, 1024), {"normalized_shape": [1024], "eps": 1e-5}, (1024,),
                             lambda x, w, b: F.layer_norm(x, [1024], w, b, 1e-5)),
    "layer_norm 2048x8192": ("layer_norm", (2048, 8192), {"normalized_shape": [8192], "eps": 1e-5}, (8192,),
                             lambda x, w, b: F.layer_norm(x, [8192], w, b, 1e-5)),
    "layer_norm 64x16384": ("layer_norm", (64, 16384), {"normalized_shape": [16384], "eps": 1e-5}, (16384,),
                            lambda x, w, b: F.layer_norm(x, [16384], w, b, 1e-5)),
    "batch_norm 32x64x56x56": ("batch_norm", (32, 64, 56, 56), {"eps": 1e-5}, (64,),
                               lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)),
    "batch_norm 8x256x28x28": ("batch_norm", (8, 256, 28, 28), {"eps": 1e-5}, (256,),
                               lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)),
    "group_norm 32x64x56x56 G=32": ("group_norm", (32, 64, 56, 56), {"num_groups": 32, "eps": 1e-5}, (64,),
                                    lambda x, w, b: F.group_norm(x, 32, w, b, 1e-5)),
    "group_norm 8x256x28x28 G=32": ("group_norm", (8, 256, 28, 28), {"num_groups": 32, "eps": 1e-5}, (256,),
                                    lambda x, w, b: F.group_norm(x, 32, w, b, 1e-5)),
    "instance_norm 32x64x56x56": ("instance_norm", (32, 64, 56, 56), {"eps": 1e-5}, (64,),
                                  lambda x, w, b: F.instance_norm(x, None, None, w, b, use_input_stats=True,
                                                                  eps=1e-5)),
    "instance_norm 8x256x28x28": ("instance_norm", (8, 256, 28, 28), {"eps": 1e-5}, (256,),
                                  lambda x, w, b: F.instance_norm(x, None, None, w, b, use_input_stats=True,
                                                                  eps=1e-5)),
    "rms_norm 4096x1024": ("rms_norm", (4096, 1024), {"normalized_shape": [1024], "eps": 1e-6}, (1024,),
                           lambda x, w, b: F.rms_norm(x, [1024], w, 1e-6)),
    "rms_norm 2048x8192": ("rms_norm", (2048, 8192), {"normalized_shape": [8192], "eps": 1e-6}, (8192,),
                           lambda x, w, b: F.rms_norm(x, [8192], w, 1e-6)),
    "rms_norm 64x16384": ("rms_norm", (64, 16384), {"normalized_shape": [16384], "eps": 1e-6}, (16384,),
                          lambda x, w, b: F.rms_norm(x, [16384], w, 1e-6)),
}


def make_inputs(case: str):
    """The NumPy inputs of a case (deterministic): x ~ 3 + 2 N(0, 1), dy, weight, bias."""
    op, shape, cfg, pshape, _ = CASES[case]
    rng = np.random.default_rng(7)
    x = 3.0 + 2.0 * rng.standard_normal(shape)
    dy = rng.standard_normal(shape)
    w = 1.0 + 0.1 * rng.standard_normal(pshape)
    b = 0.1 * rng.standard_normal(pshape)
    return x, dy, w, (None if op == "rms_norm" else b)


def refnorm_call(case: str, x, dy, w, b):
    op, _, cfg, _, _ = CASES[case]
    inputs = {"x": x, "weight": w} if b is None else {"x": x, "weight": w, "bias": b}

    def call():
        r = refnorm.evaluate(op, inputs, config=cfg, grad_outputs={"y": dy})
        return r.outputs["y"], dict(r.grads)
    return call


def torch_call(case: str, x, dy, w, b):
    fn = CASES[case][4]
    xt = torch.from_numpy(x).requires_grad_()
    wt = torch.from_numpy(w).requires_grad_()
    bt = None if b is None else torch.from_numpy(b).requires_grad_()
    dyt = torch.from_numpy(dy)
    leaves = {"x": xt, "weight": wt} if bt is None else {"x": xt, "weight": wt, "bias": bt}

    def call():
        for t in leaves.values():
            t.grad = None
        y = fn(xt, wt, bt)
        y.backward(dyt)
        return y.detach().numpy(), {k: t.grad.numpy() for k, t in leaves.items()}
    return call


def agreement(a, b) -> float:
    """max |refnorm - torch| / max |torch| over y and every gradient."""
    (ya, ga), (yb, gb) = a, b
    worst = np.abs(ya - yb).max() / np.abs(yb).max()
    for k in gb:
        worst = max(worst, np.abs(ga[k] - gb[k]).max() / np.abs(gb[k]).max())
    return float(worst)


_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_cpu_s() -> float:
    """CPU-seconds every process has used so far (all CPUs, from /proc/stat); 0 where unavailable."""
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:8]]
    except OSError:
        return 0.0
    return (sum(v) - v[3] - v[4]) / _TCK


def _sample(fn, min_s: float):
    """(seconds per call, CPUs other processes kept busy meanwhile, page faults per call) over >= min_s
    of back-to-back calls."""
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b0, c0, w0 = _busy_cpu_s(), time.process_time(), time.perf_counter()
    calls = 0
    while True:
        fn()
        calls += 1
        wall = time.perf_counter() - w0
        if wall >= min_s:
            break
    others = (_busy_cpu_s() - b0 - (time.process_time() - c0)) / wall
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / calls
    return wall / calls, max(0.0, others), faults


def time_case(case: str, repeats: int, warmup: int, min_s: float = 0.2, busy_limit: float = 0.1,
              max_retries: int = 20):
    """Median seconds per call of refnorm and of torch, sampled alternately.

    A sample is the mean over >= min_s of back-to-back calls. This machine may be shared: a sample
    during which other processes kept more than ``busy_limit`` CPUs busy is retaken (up to
    ``max_retries`` times per case, after a pause); "contended" counts the samples kept anyway.
    """
    x, dy, w, b = make_inputs(case)
    ref, tor = refnorm_call(case, x, dy, w, b), torch_call(case, x, dy, w, b)
    err = agreement(ref(), tor())
    for _ in range(warmup):
        ref(), tor()
    t_ref, t_tor, retries, contended, background = [], [], 0, 0, []
    faults = {id(t_ref): [], id(t_tor): []}
    for i in range(repeats):
        for fn, sink in (((ref, t_ref), (tor, t_tor)) if i % 2 == 0 else ((tor, t_tor), (ref, t_ref))):
            while True:
                t, others, nf = _sample(fn, min_s)
                if others <= busy_limit or retries >= max_retries:
                    break
                retries += 1
                time.sleep(1.0)
            contended += others > busy_limit
            background.append(others)
            sink.append(t)
            faults[id(sink)].append(nf)
    return {"refnorm_ms": 1e3 * statistics.median(t_ref), "torch_ms": 1e3 * statistics.median(t_tor),
            "refnorm_faults": statistics.median(faults[id(t_ref)]),
            "torch_faults": statistics.median(faults[id(t_tor)]),
            "refnorm_min_ms": 1e3 * min(t_ref), "torch_min_ms": 1e3 * min(t_tor),
            "agreement": err, "input_bytes": int(x.nbytes), "retakes": retries, "contended": contended,
            "background_cpus": max(background)}


# -------------------------------------------------------------------------------------- memory
def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(library: str, case: str, mode: str) -> dict:
    """One call in this (fresh) process: its peak memory above the state before it.

    mode "rss": the resident-set high-water mark (reset just before the call) minus the resident set
    before it. mode "tracemalloc": the peak of the memory NumPy allocated during the call.
    A warm-up on the first 1/16 of the batch loads every code path first (without growing refnorm's
    per-thread work buffers to their full size: those are counted).
    """
    import gc
    import tracemalloc
    shape = CASES[case][1]
    x, dy, w, b = make_inputs(case)
    k = max(1, shape[0] // 16)
    make = refnorm_call if library == "refnorm" else torch_call
    make(case, x[:k].copy(), dy[:k].copy(), w, b)()
    call = make(case, x, dy, w, b)
    gc.collect()
    out = {"input_bytes": int(x.nbytes)}
    if mode == "tracemalloc":
        tracemalloc.start()
        result = call()
        out["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return out
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        out["method"] = "VmHWM after clear_refs"
    except OSError:
        out["method"] = "VmHWM without a reset (an underestimate if an earlier peak was higher)"
    rss0 = _status_kb("VmRSS")
    result = call()
    out["peak_bytes"] = 1024 * (_status_kb("VmHWM") - rss0)
    del result
    return out


def measure_memory(case: str, threads: int) -> dict | None:
    if not os.path.exists("/proc/self/status"):
        return None
    res = {}
    for library, mode in (("refnorm", "rss"), ("refnorm", "tracemalloc"), ("torch", "rss")):
        cmd = [sys.executable, os.path.abspath(__file__), "--threads", str(threads),
               "--child", library, case, mode]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if p.returncode:
            raise RuntimeError(f"memory child {library} {case} {mode} failed:\n{p.stderr}")
        res[f"{library}_{mode}"] = json.loads(p.stdout.strip().splitlines()[-1])
    return res


# ------------------------------------------------------------------------------------ commands
def time_commands() -> dict:
    from refnorm.golden import commands as G
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rep = G.build(os.path.join(tmp, "golden"))
        out["golden_build_s"] = time.perf_counter() - t0
        out["golden_build_summary"] = rep.summary().replace(tmp, "$TMP")
    exe = shutil.which("refnorm")
    cmd = ([exe] if exe else [sys.executable, "-c", "import sys; from refnorm.cli import main; sys.exit(main())"])
    cmd += ["check", "--backend", "torch-cpu", "--expect-failures", "known_failures/torch-cpu.txt", "--no-progress"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    out["check_s"] = time.perf_counter() - t0
    out["check_exit"] = p.returncode
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("refnorm check")]
    out["check_summary"] = lines[-1] if lines else (p.stdout + p.stderr).strip().splitlines()[-1:]
    return out


# --------------------------------------------------------------------------------------- report
def copy_bandwidth() -> float:
    """Bytes per second NumPy moves in a large copy here (read + write, 64 MiB, best of 5)."""
    a = np.ones(8 << 20)
    b = np.empty_like(a)
    best = min(_timed(lambda: np.copyto(b, a)) for _ in range(6))
    return 2 * a.nbytes / best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch.__version__, "refnorm": refnorm.__version__
            if hasattr(refnorm, "__version__") else "?",
            "torch_threads": torch.get_num_threads(),
            "refnorm_threads": os.environ.get("REFNORM_NUM_THREADS"),
            "refnorm_kernels": _kernels(), "loadavg": os.getloadavg()}


def _kernels() -> str:
    """Which row kernels refnorm runs (its compiled ones and their instruction set, or NumPy's) and
    whether its output pool is on."""
    from refnorm.norms._common import native
    from refnorm.norms import _pool
    mod = native()
    kernels = f"compiled ({mod.isa()})" if mod is not None else "NumPy (REFNORM_NATIVE=0 or not built)"
    pool = _pool.limit_bytes() >> 20
    return kernels + (f", output pool {pool} MiB" if pool else ", no output pool (REFNORM_POOL_MB=0)")


def table(rows: list[dict], markdown: bool) -> str:
    head = ["case", "refnorm ms", "torch ms", "ratio", "refnorm min", "torch min", "floor ms",
            "faults/call", "refnorm peak/x", "torch peak/x", "agree", "busy"]
    lines = []
    for r in rows:
        mem = r.get("memory")
        ratio = lambda key: mem[key]["peak_bytes"] / r["input_bytes"]
        rp = f"{ratio('refnorm_rss'):.2f} ({ratio('refnorm_tracemalloc'):.2f})" if mem else "-"
        tp = f"{ratio('torch_rss'):.2f}" if mem else "-"
        lines.append([r["case"], f"{r['refnorm_ms']:.1f}", f"{r['torch_ms']:.1f}",
                      f"{r['refnorm_ms'] / r['torch_ms']:.2f}", f"{r['refnorm_min_ms']:.1f}",
                      f"{r['torch_min_ms']:.1f}", f"{r['floor_ms']:.1f}",
                      f"{r['refnorm_faults']:.0f} / {r['torch_faults']:.0f}", rp, tp, f"{r['agreement']:.0e}",
                      f"{r['background_cpus']:.2f}" + ("!" if r["contended"] else "")])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
        out += ["| " + " | ".join(ln) + " |" for ln in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(ln[i]) for ln in lines)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(ln) for ln in lines])


def main(args) -> int:
    if args.child:
        torch.set_num_threads(args.threads)
        print(json.dumps(child(*args.child)))
        return 0
    torch.set_num_threads(args.threads)
    cases = [c for c in CASES if not args.only or any(o in c for o in args.only)]
    info = machine()
    print(f"# {info['cpu']}, {info['cpus']} CPUs; python {info['python']}, numpy {info['numpy']}, "
          f"torch {info['torch']}; refnorm kernels: {info['refnorm_kernels']}; "
          f"threads: torch {info['torch_threads']}, refnorm {info['refnorm_threads']}; "
          f"load average {info['loadavg'][0]:.2f}", flush=True)
    print(f"# ms per call: median (and min) of {args.repeats} samples per library, each the mean of >= 0.2 s "
          f"of back-to-back calls, refnorm and torch alternating, after {args.warmup} warm-up call(s); "
          "ratio = refnorm / torch median; peak/x = peak memory of one call / bytes of x (RSS high-water "
          "mark in a fresh process; tracemalloc in parentheses); agree = max relative difference of y and "
          "the gradients; faults/call = minor page faults per call, refnorm / torch (median sample: fresh "
          "memory the kernel must clear, which depends on the allocator's state, not on the kernels); busy = "
          "most CPUs other processes used during a kept sample (samples above 0.1 are retaken; '!' = some "
          "kept anyway)", flush=True)
    bw = copy_bandwidth()
    info["copy_bandwidth_GBps"] = bw / 1e9
    print(f"# floor ms = 5 * bytes(x) / NumPy's copy bandwidth here ({bw / 1e9:.1f} GB/s read + write): "
          "the time to read x twice (forward, backward) and dy once and write y and dx once", flush=True)
    rows, bad = [], []
    for case in cases:
        r = {"case": case, **time_case(case, args.repeats, args.warmup)}
        r["floor_ms"] = 1e3 * 5 * r["input_bytes"] / bw
        if r["agreement"] > 1e-12:
            bad.append(case)
        if args.memory:
            r["memory"] = measure_memory(case, args.threads)
        rows.append(r)
        print(f"  {case}: refnorm {r['refnorm_ms']:.1f} ms, torch {r['torch_ms']:.1f} ms, "
              f"ratio {r['refnorm_ms'] / r['torch_ms']:.2f}", file=sys.stderr, flush=True)
    print(table(rows, args.markdown))
    result = {"machine": info, "args": {k: v for k, v in vars(args).items() if k != "child"}, "cases": rows}
    if args.commands:
        cmds = time_commands()
        result["commands"] = cmds
        print(f"\ngolden build (temp dir): {cmds['golden_build_s']:.1f} s  [{cmds['golden_build_summary']}]")
        print(f"refnorm check --backend torch-cpu: {cmds['check_s']:.1f} s wall, exit {cmds['check_exit']}  "
              f"[{cmds['check_summary']}]")
    result["machine"]["loadavg_end"] = os.getloadavg()
    print(f"# load average at the end {result['machine']['loadavg_end'][0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if bad:
        print(f"refnorm and torch disagree (> 1e-12 relative) on: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
