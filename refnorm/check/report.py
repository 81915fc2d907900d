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


DTYPE_ORDER = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}


def table_rows(report) -> list:
    """One dict per (op, dtype), sorted: op, dtype, cases, the count of each status, worst_ratio (the
    worst error as a fraction of its bound) and worst_err_u (in units of the dtype's unit roundoff),
    over the judged arrays of passed and failed cases (None when nothing was judged)."""
    rows = defaultdict(list)
    for c in report.cases:
        rows[(c.op, c.dtype)].append(c)
    out = []
    for (op, dt), cs in sorted(rows.items(), key=lambda kv: (kv[0][0], DTYPE_ORDER.get(kv[0][1], 9))):
        n = Counter(c.status for c in cs)
        judged = [a for c in cs if c.status in ("passed", "failed") for a in c.arrays]   # xfail left out
        out.append({"op": op, "dtype": dt, "cases": len(cs), **{k: n[k] for k in STATUSES},
                    "worst_ratio": max((a.ratio for a in judged), default=None),
                    "worst_err_u": max((a.err_u for a in judged), default=None)})
    return out


def table(report) -> str:
    """One row per (op, dtype): cases, passed, failed, skipped, errors, worst ratio to the bound, and the
    worst error in units of the output dtype's unit roundoff (relative to each array's largest value)."""
    head = f"{'op':24s} {'dtype':9s} {'cases':>5s} {'pass':>5s} {'fail':>5s} {'skip':>5s} {'error':>5s} " \
           f"{'xfail':>5s} {'worst/bound':>11s} {'worst err (u)':>13s}"
    lines = [head, "-" * len(head)]
    for r in table_rows(report):
        lines.append(f"{r['op']:24s} {r['dtype']:9s} {r['cases']:5d} {r['passed']:5d} {r['failed']:5d} "
                     f"{r['skipped']:5d} {r['error']:5d} {r['xfail']:5d} {_fmt(r['worst_ratio']):>11s} "
                     f"{_fmt(r['worst_err_u']):>13s}")
    return "\n".join(lines)


def headroom_table(report) -> str:
    """Per op and dtype, over the passed cases: the worst error as a fraction of its bound and the
    headroom (1 / that: how many times larger the worst error could be and still pass)."""
    rows = report.headroom()
    if not rows:
        return ""
    head = f"{'HEADROOM op':24s} {'dtype':9s} {'passed':>6s} {'worst/bound':>11s} {'headroom':>9s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        h = r["headroom"] if isinstance(r["headroom"], str) else _fmt(r["headroom"])
        lines.append(f"{r['op']:24s} {r['dtype']:9s} {r['passed']:6d} {_fmt(r['worst_ratio']):>11s} {h:>9s}")
    return "\n".join(lines)


def diagnosis_line(c) -> str:
    """'  diagnosis: matches pitfall A01/A02: ...' for a diagnosed case, else ''."""
    d = getattr(c, "diagnosis", None)
    return f"  diagnosis: {d['message']}" if d and d.get("message") else ""


def array_lines(arrays) -> list:
    """For each array beyond its bound: how far, how many elements, and its worst elements."""
    out = []
    for a in arrays:
        if a.passed:
            continue
        what = {'outputs': 'output', 'grads': 'grad', 'state': 'state'}[a.part]
        out.append(f"  step {a.step} {what} {a.name} ({a.dtype}): {_fmt(a.ratio)} x bound, "
                   f"{a.over} of {a.size} elements over; error up to {_fmt(a.err_u)} u")
        if a.bias > 1:
            out.append(f"      systematic bias: signed error {_fmt(a.bias)} x what unbiased rounding and the bound "
                       f"allow, over {a.bias_where} (bias test, false-alarm rate 1e-9 per case)")
        for idx, got, exp, bnd in a.worst:
            out.append(f"      at {list(idx)}: got {got:.9g}, expected {exp:.17g}, bound {bnd:.3g}")
    return out


def reproduce(case_id, backend_arg: str, golden_arg: str | None = None) -> str:
    """The command that judges one case again."""
    g = f" --golden {golden_arg}" if golden_arg else ""
    return f"refnorm check --backend {backend_arg}{g} --case {case_id}"


def case_text(c, backend_arg: str, golden_arg: str | None = None) -> str:
    """One failed, errored or expected-failure case: its message, worst elements and reproduce command."""
    out = [f"{c.status.upper()} {c.id} [{c.dtype}, contract {c.contract or '-'}]: {c.message}"]
    if diagnosis_line(c):
        out.append(diagnosis_line(c))
    out += array_lines(c.arrays)
    out.append("  reproduce: " + reproduce(c.id, backend_arg, golden_arg))
    return "\n".join(out)


def failures(report, backend_arg: str, golden_arg: str | None = None, limit: int = 50) -> str:
    """Each failed or errored case: what failed, the worst elements, and the command to reproduce it."""
    out = []
    bad = [c for c in report.cases if c.status in ("failed", "error", "xfail")]
    for c in bad[:limit]:
        out.append(case_text(c, backend_arg, golden_arg))
    if len(bad) > limit:
        out.append(f"... and {len(bad) - limit} more failed or errored cases (see --json)")
    return "\n".join(out)


def warnings(report) -> str:
    """Precision warnings: arrays within the backend's declared relaxed contract (stats_d, epi_d) but
    beyond the strict one, per op, dtype and array name, with the worst strict ratio."""
    agg = {}
    for c in report.cases:
        for a in c.warnings:
            key = (c.op, c.dtype, a.name, c.contract)
            n, cases, worst = agg.get(key, (0, set(), 0.0))
            agg[key] = (n + 1, cases | {c.id}, max(worst, a.strict_ratio))
    lines = [f"PRECISION WARNING {op} {dt} {name}: beyond the strict contract by up to {_fmt(w)} x in "
             f"{len(cs)} case(s); within the declared {contract.split('/')[0]} contract (intermediates held in {dt})"
             for (op, dt, name, contract), (n, cs, w) in sorted(agg.items())]
    return "\n".join(lines)


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
