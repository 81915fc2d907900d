"""Text reports of a check: the per-op/dtype table, each failure's worst elements with a command that
reproduces it, and the skip reasons. (JSON: ``Report.to_json()``.)"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

STATUSES = ("passed", "failed", "skipped", "error", "xfail")


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.3g}"


def table(report) -> str:
    """One row per (op, dtype): cases, passed, failed, skipped, errors, worst ratio to the bound, and the
    worst error in units of the output dtype's unit roundoff (relative to each array's largest value)."""
    rows = defaultdict(list)
    for c in report.cases:
        rows[(c.op, c.dtype)].append(c)
    head = f"{'op':24s} {'dtype':9s} {'cases':>5s} {'pass':>5s} {'fail':>5s} {'skip':>5s} {'error':>5s} " \
           f"{'xfail':>5s} {'worst/bound':>11s} {'worst err (u)':>13s}"
    lines = [head, "-" * len(head)]
    order = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}
    for (op, dt), cs in sorted(rows.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        n = Counter(c.status for c in cs)
        judged = [a for c in cs if c.status in ("passed", "failed") for a in c.arrays]   # xfail left out
        wr = max((a.ratio for a in judged), default=None)
        we = max((a.err_u for a in judged), default=None)
        lines.append(f"{op:24s} {dt:9s} {len(cs):5d} {n['passed']:5d} {n['failed']:5d} {n['skipped']:5d} "
                     f"{n['error']:5d} {n['xfail']:5d} {_fmt(wr):>11s} {_fmt(we):>13s}")
    return "\n".join(lines)


def failures(report, backend_arg: str, golden_arg: str | None = None, limit: int = 50) -> str:
    """Each failed or errored case: what failed, the worst elements, and the command to reproduce it."""
    out = []
    bad = [c for c in report.cases if c.status in ("failed", "error", "xfail")]
    for c in bad[:limit]:
        out.append(f"{c.status.upper()} {c.id} [{c.dtype}, contract {c.contract or '-'}]: {c.message}")
        for a in c.arrays:
            if a.passed:
                continue
            out.append(f"  step {a.step} { {'outputs': 'output', 'grads': 'grad', 'state': 'state'}[a.part] } {a.name} ({a.dtype}): {_fmt(a.ratio)} x bound, "
                       f"{a.over} of {a.size} elements over; error up to {_fmt(a.err_u)} u")
            for idx, got, exp, bnd in a.worst:
                out.append(f"      at {list(idx)}: got {got:.9g}, expected {exp:.17g}, bound {bnd:.3g}")
        g = f" --golden {golden_arg}" if golden_arg else ""
        out.append(f"  reproduce: refnorm check --backend {backend_arg}{g} --case {c.id}")
    if len(bad) > limit:
        out.append(f"... and {len(bad) - limit} more failed or errored cases (see --json)")
    return "\n".join(out)


def skips(report) -> str:
    reasons = Counter(c.message for c in report.cases if c.status == "skipped")
    return "\n".join(f"SKIPPED {n} case(s): {r}" for r, n in reasons.most_common())


def summary_line(report) -> str:
    s = report.summary()
    verdict = "OK" if report.ok else "FAILED"
    extra = "" if s["passed"] else " (no case was judged: nothing is verified)"
    xf = f", {s['expected_failures']} expected failures" if s["expected_failures"] else ""
    return (f"refnorm check: {verdict}: backend {s['backend']}: {s['passed']} passed, {s['failed']} failed, "
            f"{s['errors']} errors{xf}, {s['skipped']} skipped of {s['cases']} cases in {s['seconds']:.1f} s{extra}")
