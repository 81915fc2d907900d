"""Bugs the stored golden set cannot reach, planted in a small NumPy kernel (examples/tiny_backend.py:
float32 layer_norm and rms_norm), each with the generated suite or memory layout that catches it
(issue 16). ``rows()`` runs them for docs/pitfall_detection.md, section 8; tests/test_generate.py
asserts each."""
from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from examples.tiny_backend import TinyBackend  # noqa: E402
from refnorm.check import Returned  # noqa: E402


class TailDrop(TinyBackend):
    """dweight and dbias summed in blocks of 4096 rows, the partials of the last partial block dropped."""
    name = "tail-drop"

    def run(self, call):
        r = super().run(call)
        x = call.inputs["x"]
        rows = int(np.prod(x.shape[:-1]))
        if rows <= 4096 or not r.grads:
            return r
        keep = rows // 4096 * 4096
        dy = call.cotangents["y"].astype(np.float32).reshape(rows, -1)[:keep]
        xf = x.astype(np.float32).reshape(rows, -1)[:keep]
        g = dict(r.grads)
        if "bias" in g:
            g["bias"] = dy.sum(axis=0).astype(g["bias"].dtype).reshape(g["bias"].shape)
        if "weight" in g:
            mean = xf.mean(axis=1, keepdims=True)
            xhat = (xf - mean) / np.sqrt(((xf - mean) ** 2).mean(axis=1, keepdims=True) + np.float32(call.config["eps"]))
            g["weight"] = (dy * xhat).sum(axis=0).astype(g["weight"].dtype).reshape(g["weight"].shape)
        return Returned(r.outputs, g)


class Dense(TinyBackend):
    """Reads its input's memory as if it were dense C order: ignores the strides it is given."""
    name = "dense-read"

    def run(self, call):
        def dense(a):
            if a.ndim < 2 or a.flags.c_contiguous:
                return a
            return np.lib.stride_tricks.as_strided(a, a.shape, np.zeros(a.shape).astype(a.dtype).strides)
        c = type(call)(call.op, call.dtype, call.config, call.training, {k: dense(v) for k, v in call.inputs.items()},
                       call.cotangents, call.state)
        return super().run(c)


class SquareInDtype(TinyBackend):
    """Squares of the deviations held in float16's range: above 65504 they become inf (the overflow alone).

    A float16 product with a wide internal mantissa; C01-C03 without their rounding."""
    name = "square-in-dtype"

    def run(self, call):
        r = super().run(call)
        x = call.inputs["x"]
        if x.dtype != np.float16 or call.op != "layer_norm":
            return r
        xf = x.astype(np.float32)
        d = xf - xf.mean(axis=-1, keepdims=True)
        sq = d * d
        sq[sq > 65504] = np.inf
        y = d / np.sqrt(sq.mean(axis=-1, keepdims=True) + np.float32(call.config["eps"]))
        w, b = call.inputs.get("weight"), call.inputs.get("bias")
        w = None if w is None else w.astype(np.float32) + np.float32(call.config.get("weight_offset", 0.0))
        y = y * (1 if w is None else w) + (0 if b is None else b.astype(np.float32))
        return Returned({**r.outputs, "y": y.astype(np.float16)}, r.grads)


class ChannelsLastMisread(TinyBackend):
    """Reads an NHWC-strided activation's memory as if it were NCHW (a channels_last reading error)."""
    name = "nhwc-as-nchw"

    def run(self, call):
        def misread(a):
            if a.ndim < 3 or a.flags.c_contiguous:
                return a
            perm = (0,) + tuple(range(2, a.ndim)) + (1,)
            return np.ascontiguousarray(a.transpose(perm)).reshape(a.shape)      # memory order, NCHW shape
        c = type(call)(call.op, call.dtype, call.config, call.training,
                       {k: misread(v) for k, v in call.inputs.items()}, call.cotangents, call.state)
        return super().run(c)

class RowLimit(TinyBackend):
    """Rows from 2^23 on come back as zeros (an indexing limit of a kernel's row count)."""
    name = "row-limit"

    def run(self, call):
        r = super().run(call)
        y = r.outputs["y"]
        lead = int(np.prod(y.shape[:-1]))
        if lead <= 2 ** 23:
            return r
        y = y.reshape(lead, -1).copy()
        y[2 ** 23:] = 0
        return Returned({**r.outputs, "y": y.reshape(r.outputs["y"].shape)}, r.grads)


# (catalogue id or "-" for a mechanism that is no catalogue row, backend, what catches it:
# ("suite", name) or ("layout", name))
PLANTED = [
    ("-", TailDrop, ("suite", "boundaries")),
    ("F11", Dense, ("layout", "strided")),
    ("F01", ChannelsLastMisread, ("layout", "channels_last")),
    ("C01", SquareInDtype, ("suite", "overflow")),
    ("F08", RowLimit, ("suite", "limits")),
]


def rows(golden):
    """[(id, bug, golden caught / judged, where, caught / judged, worst ratio)] for section 8."""
    from refnorm.check import run_check
    from refnorm.check.core import run_generated
    from refnorm.golden import generate
    ops = ["layer_norm", "rms_norm"]
    out = []
    for pid, backend, (kind, name) in PLANTED:
        g = run_check(backend(), golden, ops=ops)
        if kind == "suite":
            r = run_generated(backend(), [generate.parse(t) for t, _ in generate.suite(name)], ops=ops)
        else:
            r = run_check(backend(), golden, ops=ops, layout=name)

        def caught(rep):
            return [c for c in rep.cases if c.status in ("failed", "error")]

        def judged(rep):
            return [c for c in rep.cases if c.status != "skipped"]
        worst = max((c.worst_ratio for c in caught(r)), default=0.0)
        out.append((pid, backend.__doc__.strip().split("\n")[0], f"{len(caught(g))} / {len(judged(g))}",
                    f"{kind} `{name}`", f"{len(caught(r))} / {len(judged(r))}", worst))
    return out
