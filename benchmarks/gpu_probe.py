"""Who is right when torch's CUDA kernels fail refnorm's bounds: the same golden cases judged through
several CUDA paths and precision contracts (issue 19's review of the generated known failures).

    python benchmarks/gpu_probe.py OUT.md        # on a machine with a CUDA device; ~1 min

For batch_norm, instance_norm, group_norm and layer_norm in float16/bfloat16, both parameter layouts,
each golden case is judged
  * through the path the torch-cuda adapter takes (native_batch_norm for batch_norm, F.instance_norm,
    native_group_norm, native_layer_norm), and through the module path users run (F.batch_norm, which
    picks cuDNN on CUDA; F.group_norm; F.layer_norm), with cuDNN enabled and disabled;
  * under the contract the adapter declares (measured on CPU) and under the relaxed ones (stats_d,
    epi_d).
A path that passes only a relaxed contract holds something in the case dtype that the CPU kernel does
not; a path that fails every contract computes something else. Then one direct measurement: the
parameter gradients' error against the float64 sums, in units of the float32 rounding of the exact
value, which needs no bound at all. Writes a Markdown report (OUT.md) and prints it.
"""
from __future__ import annotations

import dataclasses
import os
import platform
import sys
import time

import torch

from refnorm.check.backends.torch_backend import TorchBackend
from refnorm.check.core import run_check
from refnorm.spec import DEFAULT

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden")
OPS = ("batch_norm", "instance_norm", "group_norm", "layer_norm")
DTYPES = ("float16", "bfloat16")


class Probe(TorchBackend):
    """The torch-cuda adapter with the op's module path (``module=True``), cuDNN on or off, and a
    contract kind forced (None: the adapter's own)."""

    def __init__(self, param_dtype, module, cudnn, kind):
        super().__init__("cuda", param_dtype)
        self.module, self.cudnn, self.kind = module, cudnn, kind
        self.name += f" {'module' if module else 'native'} cudnn={'on' if cudnn else 'off'} {kind or 'declared'}"

    def contract_for(self, op, dtype, *args, **kw):
        c = super().contract_for(op, dtype, *args, **kw)
        return dataclasses.replace(c, kind=self.kind) if self.kind else c

    def run(self, call):
        with torch.backends.cudnn.flags(enabled=self.cudnn):
            return super().run(call)

    def _batch_norm(self, torch_, t, cfg, st, training):
        if not self.module:
            return super()._batch_norm(torch_, t, cfg, st, training)
        import torch.nn.functional as F
        from refnorm.check.backends import torch_backend as TB
        rm, rv, nbt = TB._running(torch_, "batch_norm", st, self.device)
        tracking = rm is not None
        mom = cfg["momentum"]
        if training and tracking:
            nbt = nbt + 1
            mom = 0.1 if mom is DEFAULT else mom
            mom = 1.0 / float(nbt.item()) if mom is None else float(mom)
        else:
            mom = 0.0
        y = F.batch_norm(t["x"], rm, rv, t.get("weight"), t.get("bias"), training or not tracking, mom,
                         float(cfg["eps"]))
        new = {"running_mean": rm, "running_var": rv, "num_batches_tracked": nbt} if tracking else {}
        return {"y": y}, new

    def _layer_norm(self, torch_, t, cfg, st, training):
        if not self.module:
            return super()._layer_norm(torch_, t, cfg, st, training)
        import torch.nn.functional as F
        from refnorm.check.backends import torch_backend as TB
        w = t.get("weight")
        if w is not None and float(cfg["weight_offset"]) != 0.0:
            w = w + float(cfg["weight_offset"])
        return {"y": F.layer_norm(t["x"], TB.T.int_list(cfg["normalized_shape"]), w, t.get("bias"),
                                  float(cfg["eps"]))}, {}

    def _group_norm(self, torch_, t, cfg, st, training):
        if not self.module:
            return super()._group_norm(torch_, t, cfg, st, training)
        import torch.nn.functional as F
        return {"y": F.group_norm(t["x"], int(cfg["num_groups"]), t.get("weight"), t.get("bias"),
                                  float(cfg["eps"]))}, {}


def summarize(rep):
    """passed/partial/failed/errors and, per failing array, the worst ratio."""
    counts = {k: 0 for k in ("passed", "partial", "failed", "error", "skipped")}
    worst = {}
    errors = {}
    for c in rep.cases:
        counts[c.status] = counts.get(c.status, 0) + 1
        if c.status == "failed":
            errors.setdefault("failed: " + ", ".join(sorted({f"{a.part}.{a.name}" for a in c.arrays
                                                              if a.verdict == "failed"})), []).append(c.id)
        if c.status == "error":
            errors.setdefault(" ".join(c.message.split(": ", 1)[-1].split())[:400], []).append(c.id)
        for a in c.arrays:
            if a.verdict == "failed":
                key = f"{a.part[:-1] if a.part.endswith('s') else a.part}.{a.name}"
                worst[key] = max(worst.get(key, 0.0), float(a.ratio), float(a.bias))
    return counts, worst, errors


def param_grad_error(module):
    """max |dbias - sum(dy)| and |dweight - sum(dy xhat)| of a 16-bit batch_norm on CUDA over the
    channels, in units of u32 * sum of |terms| (u32 = 2^-24; the float64 sums are the truth): a float32
    accumulation of n terms stays within a few sqrt(n) of them, one in the 16-bit dtype near
    2^13 (float16) or 2^16 (bfloat16) times more."""
    rows = []
    g = torch.Generator().manual_seed(0)
    for dt in (torch.float16, torch.bfloat16):
        for shape in ((16, 3, 4, 5), (64, 8, 28, 28)):
            x = torch.randn(shape, generator=g).to(dt)
            dy = torch.randn(shape, generator=g).to(dt)
            C = shape[1]
            w = torch.randn(C, generator=g)
            b = torch.randn(C, generator=g)
            xc, dyc = x.cuda().requires_grad_(), dy.cuda()
            wc, bc = w.cuda().requires_grad_(), b.cuda().requires_grad_()
            if module:
                y = torch.nn.functional.batch_norm(xc, None, None, wc, bc, True, 0.0, 1e-5)
            else:
                y = torch.native_batch_norm(xc, wc, bc, None, None, True, 0.0, 1e-5)[0]
            dx, dw, db = torch.autograd.grad(y, [xc, wc, bc], dyc)
            x64, dy64 = x.detach().double(), dy.double()
            axes = [0] + list(range(2, len(shape)))
            mean = x64.mean(axes, keepdim=True)
            xhat = (x64 - mean) / torch.sqrt(x64.var(axes, unbiased=False, keepdim=True) + 1e-5)
            u = 2.0 ** -24                      # float32 unit roundoff
            e_db = ((db.cpu().double() - dy64.sum(axes)).abs() / (u * dy64.abs().sum(axes))).max().item()
            e_dw = ((dw.cpu().double() - (dy64 * xhat).sum(axes)).abs()
                    / (u * (dy64 * xhat).abs().sum(axes))).max().item()
            rows.append((str(dt).replace("torch.", ""), "x".join(map(str, shape)), e_dw, e_db,
                         str(dw.dtype).replace("torch.", "")))
    return rows


def main(out_path):
    t0 = time.time()
    lines = ["# Who is right: torch's CUDA normalizers against refnorm's bounds", "",
             f"Generated by `python benchmarks/gpu_probe.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"{torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
             f"{torch.backends.cudnn.version()}), Python {platform.python_version()}. Every figure below is "
             "measured by this script; nothing is typed by hand.", "",
             "Golden cases of each op in float16 and bfloat16. *path*: `native` is what the torch-cuda adapter "
             "calls (native_batch_norm, F.instance_norm, native_group_norm, native_layer_norm), `module` what "
             "nn modules call (F.batch_norm, F.group_norm, F.layer_norm). *contract*: `declared` is the "
             "adapter's (measured on CPU), the others forced. Cells: passed/partial/failed/errors; then the "
             "worst ratio to the bound of each failing array.", "",
             "| op | params | path | cuDNN | contract | p/pa/f/e | failing arrays (worst x bound) |",
             "|---|---|---|---|---|---|---|"]
    error_texts = {}
    for op in OPS:
        for layout in ("float32", "case"):
            for module in ((False, True) if op != "instance_norm" else (False,)):
                for cudnn in ((True, False) if op in ("batch_norm", "instance_norm") else (True,)):
                    for kind in (None, "stats_d", "epi_d"):
                        be = Probe(layout, module, cudnn, kind)
                        rep = run_check(be, GOLDEN, ops=[op], dtypes=list(DTYPES), diagnose=False)
                        n, worst, errors = summarize(rep)
                        for k, ids in errors.items():
                            k = f"{kind or 'declared'}, cuDNN {'on' if cudnn else 'off'}: {k}" if k.startswith("failed") else k
                            error_texts.setdefault((op, layout, module), {}).setdefault(k, set()).update(ids)
                        arr = ", ".join(f"{k} {v:.3g}" for k, v in sorted(worst.items())) or "-"
                        lines.append(f"| {op} | {layout} | {'module' if module else 'native'} | "
                                     f"{'on' if cudnn else 'off'} | {kind or 'declared'} | "
                                     f"{n['passed']}/{n['partial']}/{n['failed']}/{n['error']} | {arr} |")
                        print(lines[-1], flush=True)
    lines += ["", "## Errors and failures (over every contract and cuDNN setting of each op, layout and path)", ""]
    for (op, layout, module), d in error_texts.items():
        for text, ids in d.items():
            shown = ", ".join(sorted(ids)[:6]) + (", ..." if len(ids) > 6 else "")
            lines.append(f"* {op}, params {layout}, {'module' if module else 'native'} path: `{text}` "
                         f"({len(ids)} cases: {shown})")
    lines += ["", "## Parameter gradients against the float64 sums (no bound involved)", "",
              "batch_norm training, weight and bias float32, x and dy in the dtype shown, random normal data; the "
              "error of each returned float32 parameter gradient, the worst channel, in units of u32 * sum of "
              "|terms| (u32 = 2^-24): a float32 accumulation of n terms stays within a few sqrt(n) of these "
              "units; a 16-bit accumulator or 16-bit rounded terms cost ~2^13 (float16) to 2^16 (bfloat16) "
              "times more.", "",
              "| path | dtype | shape | dweight error (u32 sum) | dbias error (u32 sum) | returned dtype |",
              "|---|---|---|---|---|---|"]
    for module in (False, True):
        for cudnn in (True, False):
            with torch.backends.cudnn.flags(enabled=cudnn):
                for dt, shape, e_dw, e_db, rdt in param_grad_error(module):
                    lines.append(f"| {'F.batch_norm' if module else 'native_batch_norm'} cudnn={'on' if cudnn else 'off'} "
                                 f"| {dt} | {shape} | {e_dw:.3g} | {e_db:.3g} | {rdt} |")
                    print(lines[-1], flush=True)
    lines += ["", "## weight_norm in float64: torch._weight_norm against the float64 formula", "",
              "w = g * v / ||v|| (norm over every axis but dim), float64 tensors; the error of w in units of "
              "u64 * |w| (u64 = 2^-53), the worst element; CPU and CUDA on the same data.", "",
              "| dim | v shape | CPU error (u64) | CUDA error (u64) |", "|---|---|---|---|"]
    for dim, shape in ((0, (3, 7)), (0, (6, 100)), (1, (6, 100)), (-1, (6, 100))):
        gen = torch.Generator().manual_seed(1)
        v = torch.randn(shape, generator=gen, dtype=torch.float64)
        gsh = [1] * len(shape)
        if dim != -1:
            gsh[dim] = shape[dim]
        g = torch.randn(gsh, generator=gen, dtype=torch.float64)
        axes = [a for a in range(len(shape)) if a != dim] if dim != -1 else list(range(len(shape)))
        exact = g * v / v.pow(2).sum(axes, keepdim=True).sqrt()
        errs = [((torch._weight_norm(v.to(d), g.to(d), dim).cpu() - exact).abs() / (2.0 ** -53 * exact.abs())).max().item()
                for d in ("cpu", "cuda")]
        lines.append(f"| {dim} | {'x'.join(map(str, shape))} | {errs[0]:.3g} | {errs[1]:.3g} |")
        print(lines[-1], flush=True)
    lines += ["", "## The Triton example in float64, compiled", ""]
    try:
        import triton
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
        from examples import triton_norms
        x = torch.randn(4, 33, dtype=torch.float64, device="cuda", requires_grad=True)
        w = torch.randn(33, dtype=torch.float64, device="cuda", requires_grad=True)
        y = triton_norms.layer_norm(x, w, None, normalized_shape=[33])
        y.sum().backward()
        ref = torch.nn.functional.layer_norm(x.detach(), [33], w.detach(), None, 1e-5)
        lines.append(f"triton {triton.__version__}: compiled and ran; max |y - F.layer_norm| = "
                     f"{(y.detach() - ref).abs().max().item():.3g}")
    except Exception as e:                       # the finding is the message
        text = " ".join(str(e).split())
        lines.append(f"triton: {type(e).__name__}: `... {text[-1200:]}`")
    print(lines[-1], flush=True)
    lines += ["", f"Run time: {time.time() - t0:.0f} s."]
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("gpu_probe.py: torch sees no CUDA device; nothing run")
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu_probe.md")
