"""What the user waits for when judging a kernel: refnorm's whole judgement of one call (reference, bounds,
comparison, bias test) against torch float64 autograd forward + backward on the same shape, in one run.

    python benchmarks/judge.py [--shapes 1024x4096 4096x4096] [--threads 2]

The kernel judged is torch's own float32 layer_norm (forward and backward); the judge is
``refnorm.testing.assert_close_to_reference``. Issue 16's target is a ratio <= 1.0 and growth <= 4.5x for
4x the elements; docs and the session notes quote this script's output.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main():
    import torch
    from refnorm.testing import assert_close_to_reference
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=["1024x4096", "4096x4096"])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    for text in args.shapes:
        R, N = (int(s) for s in text.split("x"))
        x, dy = (rng.standard_normal((R, N)).astype(np.float32) for _ in range(2))
        w, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
        tx, tw, tb = (torch.from_numpy(a).requires_grad_() for a in (x, w, b))
        y = torch.nn.functional.layer_norm(tx, (N,), tw, tb, 1e-5)
        y.backward(torch.from_numpy(dy))
        outputs = {"y": y.detach().numpy()}
        grads = {"x": tx.grad.numpy(), "weight": tw.grad.numpy(), "bias": tb.grad.numpy()}

        def torch64():
            a, ww, bb = (torch.from_numpy(v.astype(np.float64)).requires_grad_() for v in (x, w, b))
            torch.nn.functional.layer_norm(a, (N,), ww, bb, 1e-5).backward(torch.from_numpy(dy.astype(np.float64)))
        torch64()
        best = []
        for _ in range(3):
            t = time.perf_counter()
            torch64()
            best.append(time.perf_counter() - t)
        t = time.perf_counter()
        assert_close_to_reference("layer_norm", {"x": x, "weight": w, "bias": b}, outputs,
                                  config={"normalized_shape": [N]}, cotangents={"y": dy}, grads=grads,
                                  allow_partial=True)
        judge = time.perf_counter() - t
        print(f"{R}x{N} float32: torch float64 fwd+bwd {min(best) * 1e3:.0f} ms (best of 3), "
              f"judge {judge * 1e3:.0f} ms, ratio {judge / min(best):.0f}x")


if __name__ == "__main__":
    main()
