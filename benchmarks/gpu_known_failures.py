"""known_failures/torch-cuda*.txt from the JSON reports of a GPU run (benchmarks/gpu_run.sh calls it).

    python benchmarks/gpu_known_failures.py RUN_DIR "TORCH_VERSION on DEVICE"

One line per failing or erroring golden case of RUN_DIR/torch-cuda.json and torch-cuda-caseparams.json:
the arrays that failed (or the error's text), the diagnosis, and the reason. The reasons come from
``explain``: each rule states what was measured on a GPU (benchmarks/gpu_probe.py, docs/gpu_probe.md) and
fits only the cases it names; a case no rule explains keeps the checker's message, marked "not
reviewed". It runs on the machine that holds the reports (no GPU needed), so the reasons can be
reviewed and the lists rewritten after the run.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time

SINGULAR = {"outputs": "output", "grads": "grad", "state": "state"}
LOW = ("f16", "bf16")


def _dtype(cid):
    m = re.search(r"_(f64|f32|f16|bf16)_", cid)
    return m.group(1) if m else ""


def explain(cid: str, status: str, arrays: list, diag: str, message: str) -> str | None:
    """The reviewed reason of one case, or None. ``arrays``: the failing arrays (grad.x, ...)."""
    op, dt = cid.split("/")[0], _dtype(cid)
    worst = re.findall(r"([\d.e+]+|inf) x bound", message)
    ratio = f" (up to {max(worst, key=lambda w: float(w))} x bound)" if worst else ""
    if status == "error":
        if "invalid gradient at index 1 - got [2] but expected shape compatible with [1, 2]" in message:
            return ("torch's CUDA layer_norm backward returns dweight flattened ([2] for normalized_shape [1, 2]) "
                    "and autograd rejects it; the only golden case with 65537 rows and a 2-D normalized_shape "
                    "(the same case passes on CPU)")
        if "gradients of bias, x" in message:
            said = message.rsplit("RuntimeError: ", 1)[-1][:90]
            return (f"torch's CUDA {op} backward with a bias and no weight raises ('{said}'): its native backward "
                    "with an undefined gamma and the dbias output requested; on CPU group_norm raises the same way")
        return None
    if op == "weight_norm" and dt == "f64":
        return ("torch's CUDA _weight_norm (the fused kernel, dim 0 or the last) is only float32-accurate on float64 "
                f"tensors: w is ~5e8 u64 (~2^-24 relative) off the float64 formula in docs/gpu_probe.md; dim=None "
                f"(the composite) is exact{ratio}")
    if op == "batch_norm" and "const_eps1e-12" in cid and dt == "f16" and arrays == ["grad.x"]:
        return ("grad x of a constant channel with eps=1e-12 (rstd = 1e6): torch's CUDA backward returns -inf where "
                "the exact gradient is finite and representable (e.g. 1.76e4), in every contract of docs/gpu_probe.md: "
                "an intermediate of rstd's size or its square overflows float16, so it is held in the input dtype; "
                "the CPU kernels pass it")
    if "const_eps1e-12" in cid and dt == "f16" and op in ("group_norm", "instance_norm", "batch_norm") \
            and "grad.x" in arrays and "grad.weight" in arrays:
        return "rstd = 1e6 held in float16 overflows to inf: y, dx, dweight inf/NaN (as on CPU with case-dtype parameters)"
    if op in ("batch_norm", "instance_norm") and dt in LOW and arrays == ["grad.x"]:
        return (f"grad x beyond stats_d, the contract declared for CUDA{ratio}; passes epi_d in docs/gpu_probe.md: "
                "an intermediate of the elementwise backward rounded to the case dtype (not traced in torch's source)")
    if op == "lp_normalize" and dt == "f16" and diag == "lp_norm_in_d":
        return (f"the diagnosis names lp_norm_in_d, ||x|| held in float16 beyond the epi_d contract{ratio}; CPU's "
                "F.normalize passes epi_d on the same cases")
    if op == "local_response_norm" and dt == "f16" and diag == "lrn_sq_in_d":
        return (f"the diagnosis names lrn_sq_in_d, x*x rounded to float16 before the window sum{ratio}; CPU's "
                "F.local_response_norm passes epi_d on the same cases")
    return None


def lines_for(report: dict) -> list:
    rows = []
    for c in report["cases"]:
        msg = " ".join(c["message"].split())
        if c["status"] == "failed":
            arrays = sorted({f"{SINGULAR[a['part']]}.{a['name']}" for a in c["arrays"] if a["verdict"] == "failed"})
            diag = (c.get("diagnosis") or {}).get("matched") or "none"
            why = explain(c["id"], "failed", arrays, diag, msg) or f"not reviewed; measured: {msg[:160]}"
            rows.append(f"{c['id']}  fails={','.join(arrays)} diagnosis={diag}  {why}")
        elif c["status"] == "error":
            text = c["message"].split(": ", 2)[-1][:60].replace('"', "'")
            why = explain(c["id"], "error", [], "", msg) or f"not reviewed; measured: {msg[:160]}"
            rows.append(f'{c["id"]}  error="{text}"  {why}')
    return [r.replace("#", "no.") for r in rows]       # '#' starts a comment in these files


def main(run_dir, what):
    for name in ("torch-cuda", "torch-cuda-caseparams"):
        with open(os.path.join(run_dir, f"{name}.json")) as f:
            rows = lines_for(json.load(f))
        head = [f"# Known defects of {what} (refnorm check --backend {name} --expect-failures "
                f"known_failures/{name}.txt).",
                f"# Generated by benchmarks/gpu_known_failures.py on {time.strftime('%Y-%m-%d', time.gmtime())} from "
                "the reports of benchmarks/gpu_run.sh; the reasons are its reviewed rules (docs/gpu_probe.md).", ""]
        with open(f"known_failures/{name}.txt", "w") as f:
            f.write("\n".join(head + rows) + "\n")
        print(f"wrote known_failures/{name}.txt ({len(rows)} cases, "
              f"{sum('not reviewed' in r for r in rows)} not reviewed)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2])
