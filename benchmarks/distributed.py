"""The distributed check end to end, as a user runs it: ``refnorm check --backend torch-dist-cpu
--world-size N`` over every distributed case (refnorm/golden/distributed.py), in a fresh process, timed
from the command's start to its exit (interpreter start, torch import, the group's start, every case).

    python benchmarks/distributed.py [--world-size 4] [--repeat 3] [--backend torch-dist-cpu]

Issue 20's target: under 60 s on the project's 2-core machine with 4 ranks (the process start is paid
once: one group for the whole check). Prints each run's wall time and the check's own "in S s".
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world-size", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--backend", default="torch-dist-cpu")
    args = p.parse_args()
    cmd = [sys.executable, "-m", "refnorm.cli", "check", "--backend", args.backend, "--world-size",
           str(args.world_size), "--no-progress"]
    print("$", " ".join(cmd[2:]), f"(load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)")
    walls = []
    for i in range(args.repeat):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()[-300:]
        inner = re.search(r"in ([0-9.]+) s", last)
        print(f"run {i + 1}: exit {r.returncode}, wall {walls[-1]:.1f} s, the check's own {inner.group(1) if inner else '?'} s")
        print("   ", last)
        if r.returncode != 0:
            sys.exit(r.returncode)
    print(f"wall: best {min(walls):.1f} s, worst {max(walls):.1f} s over {len(walls)} run(s)")


if __name__ == "__main__":
    main()
