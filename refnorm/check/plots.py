"""PNG plots of a check: for each op, how far below its bound each dtype's arrays sit.

One figure per op: for each dtype, the sorted ratios ``excess / bound`` of every judged array
(outputs, gradients, state) of the passed and failed cases, drawn as the fraction of arrays at or
below each ratio (an empirical CDF) on a log x axis, with the pass line at 1. A curve far to the left
of the line is a kernel with digits to spare; a curve touching it is a kernel at its bound; anything
right of it failed. Ratios of 0 (the exactly rounded value) are drawn at ``FLOOR``, infinite ones
(NaN, overflow) at ``CEIL``.

matplotlib is an optional extra (``pip install 'refnorm[report]'``); it is imported when a plot is
drawn, never by ``import refnorm``, and only through its object API (no pyplot, no global backend).
"""
from __future__ import annotations

import io
import math
from collections import defaultdict

from .report import DTYPE_ORDER

FLOOR, CEIL = 1e-4, 1e3
COLORS = {"float64": "#1b9e77", "float32": "#d95f02", "float16": "#7570b3", "bfloat16": "#e7298a"}


def ratios_by_op(report) -> dict:
    """{op: {dtype: [ratio of each verified or failed array]}} over passed, partial and failed cases
    (unconstrained arrays verify nothing and are left out)."""
    out = defaultdict(lambda: defaultdict(list))
    for c in report.cases:
        if c.status in ("passed", "partial", "failed"):
            out[c.op][c.dtype] += [a.ratio for a in c.arrays if a.verdict != "unconstrained"]
    return {op: {dt: v for dt, v in d.items() if v} for op, d in out.items() if any(d.values())}


def _clip(r):
    return CEIL if not math.isfinite(r) else min(max(r, FLOOR), CEIL)


def plot_op(op, by_dtype, backend) -> bytes:
    """One op's figure as PNG bytes (``by_dtype``: {dtype: [ratios]})."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.axvspan(1, CEIL * 1.5, color="#f4cccc", zorder=0)
    ax.axvline(1, color="#cc0000", lw=1.5, zorder=1, label="bound (pass: ratio <= 1)")
    for dt in sorted(by_dtype, key=lambda d: DTYPE_ORDER.get(d, 9)):
        r = sorted(_clip(v) for v in by_dtype[dt])
        n = len(r)
        worst = max(by_dtype[dt])
        ax.step(r, [(i + 1) / n for i in range(n)], where="post", lw=2, color=COLORS.get(dt), zorder=2,
                label=f"{dt}: {n} arrays, worst {worst:.3g}")
    ax.set_xscale("log")
    ax.set_xlim(FLOOR / 1.5, CEIL * 1.5)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"error / derived bound per array (0 drawn at {FLOOR:g}, inf at {CEIL:g})")
    ax.set_ylabel("fraction of arrays at or below")
    ax.set_title(f"{op}: how far below its bound backend {backend} sits")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small", framealpha=0.95)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def error_plots(report) -> dict:
    """{"<op>.png": PNG bytes} for every op with judged arrays. Raises ImportError without matplotlib."""
    import matplotlib  # noqa: F401 - fail here, before any figure, when the extra is missing
    return {f"{op}.png": plot_op(op, d, report.backend) for op, d in sorted(ratios_by_op(report).items())}
