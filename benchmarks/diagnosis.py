"""Issue 21: the diagnosis stays off the hot path. For one failing layer_norm case (float32, weight and
bias, forward and backward) the time to judge it without the diagnosis, and the time the diagnosis
adds; the target is diagnosis < 2x judgement at 4096x4096.

    python benchmarks/diagnosis.py [--shapes 1024x4096 4096x4096] [--bugs ln_eps_outside ln_no_mean_g]

The failing kernels are tests/planted/torch_kernel.py's (torch float32, one planted bug each); the
case is built in a scratch golden directory (refnorm.golden.commands.build), as a golden case is.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]


def main():
    import torch
    from planted.torch_kernel import TorchKernel
    from refnorm.check import diagnosis
    from refnorm.check.core import check_case
    from refnorm.golden import generate
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=["4096x4096"])
    p.add_argument("--bugs", nargs="+", default=["ln_eps_outside", "ln_no_mean_g", "ln_one_pass", "ln_dw_sum_dy"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for text in a.shapes:
        loaded = generate.materialize(generate.parse(f"layer_norm shape={text} dtype=float32 regime=normal"))
        for bug in a.bugs:
            k = TorchKernel(bug)
            original = diagnosis.diagnose
            runs = []
            for _ in range(a.repeat):       # the judgement = the whole check_case less the diagnosis in it
                spent = []

                def timed(*args):
                    t0 = time.perf_counter()
                    try:
                        return original(*args)
                    finally:
                        spent.append(time.perf_counter() - t0)
                diagnosis.diagnose = timed
                t = time.perf_counter()
                r = check_case(k, loaded, diagnose=True)
                full = time.perf_counter() - t
                diagnosis.diagnose = original
                runs.append((full - sum(spent), sum(spent)))
            judge, diag = min(j for j, _ in runs), min(d for _, d in runs)
            d = r.diagnosis or {}
            print(f"{text} {bug}: {r.status}, judge {judge:.2f} s, diagnosis {diag:.2f} s "
                  f"({diag / judge:.2f}x the judgement; best of {a.repeat}); named: {d.get('matched')} "
                  f"(confidence {d.get('confidence')})", flush=True)


if __name__ == "__main__":
    main()
