"""The ``refnorm check --report DIR`` summary: ``summary.md`` (the per-op/dtype table, the failures
with their worst elements, the skip reasons) and one ``<op>.png`` per op (``plots.py``).

Without matplotlib the Markdown is still written and says, at the top, that the plots were skipped
and why; ``report_files`` returns that note too, for the command line to print.
"""
from __future__ import annotations

from collections import Counter

from . import report as R
from .judge import percent

SUMMARY = "summary.md"
NO_MATPLOTLIB = "plots skipped: matplotlib is not installed (pip install 'refnorm[report]')"


def _cell(v) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(report) -> list:
    head = ["op", "dtype", "cases", "passed", "partial", "failed", "skipped", "errors", "expected failures",
            "arrays verified", "unconstrained", "unchecked", "worst / bound", "worst error (u)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for r in R.table_rows(report):
        cells = [r["op"], r["dtype"], r["cases"], r["passed"], r["partial"], r["failed"], r["skipped"], r["error"],
                 r["xfail"], r["verified"], r["unconstrained"], r["unchecked"],
                 R._fmt(r["worst_ratio"]), R._fmt(r["worst_err_u"])]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def markdown(report, backend_arg: str, golden_arg: str | None, plots: dict, note: str | None,
             accept_partial=False) -> str:
    """The summary as Markdown; ``plots``: the PNG file names to show, ``note``: why there are none."""
    out = [f"# refnorm check: backend {backend_arg}", "", R.summary_line(report, accept_partial), "",
           R.platform_line(report), "",
           f"Golden set: `{report.golden}`. The worst error is a fraction of its derived bound (below 1 passes) "
           "and in units of the dtype's unit roundoff (docs/tolerances.md). Every array is verified, failed, "
           "unconstrained (its bound is at least its own scale: nothing verified) or unchecked (not returned, "
           "no bound); a verified array with fewer than half its elements constrained is marked *weakly* "
           "(section \"Weakly verified\"); a case is passed only when every array of it is verified, partial when none failed "
           "but some array was not verified.", ""]
    if note:
        out += [f"**Note: {note}.**", ""]
    out += ["## Per op and dtype", ""] + _table(report) + [""]
    hr = report.headroom()
    if hr:
        out += ["## Headroom (passed cases)", "",
                "The worst excess (the distance from the reference to the returned value's rounding interval) of "
                "the passed cases as a fraction of its bound, and the headroom 1 / that: how many times further "
                "outside its interval the worst element could be and still pass; *exact* when every element was "
                "inside it. Not a bound on |error|: a result one ulp off scores ulp / (2 bound), often above 1 "
                "in float16/bfloat16 (docs/tolerances.md, section 9, \"Headroom\").", "",
                "| op | dtype | passed | worst / bound | headroom |", "|---|---|---:|---:|---:|"]
        out += [f"| {r['op']} | {r['dtype']} | {r['passed']} | {R._fmt(r['worst_ratio'])} | "
                f"{r['headroom'] if isinstance(r['headroom'], str) else R._fmt(r['headroom'])} |" for r in hr] + [""]
    out += ["## How far below its bound", ""]
    if plots:
        out += ["Per op: the fraction of arrays whose error / bound is at or below x, per dtype; "
                "the red line is the bound.", ""]
        out += [f"![{name[:-4]}]({name})" for name in plots] + [""]
    else:
        out += [f"No plots: {note}." if note else "No plots: no array was judged.", ""]
    for status, title in (("failed", "Failures"), ("error", "Errors"), ("partial", "Partial (not every array verified)"),
                          ("xfail", "Expected failures")):
        cases = [c for c in report.cases if c.status == status]
        if cases:
            out += [f"## {title} ({len(cases)})", "", "```text"]
            out += [R.case_text(c, backend_arg, golden_arg) for c in cases] + ["```", ""]
    wk = R.weak_groups(report)
    if wk:
        out += [f"## Weakly verified ({sum(g[3] for g in wk)} arrays)", "", f"Each array here was {R.WEAK_NOTE}.", "",
                "| op | dtype | array | cases | least constrained |", "|---|---|---|---:|---:|"]
        out += [f"| {op} | {dt} | {name} | {n} | {percent(f)} |" for op, dt, name, n, f in wk] + [""]
    reasons = Counter(c.message for c in report.cases if c.status == "skipped")
    if reasons:
        out += [f"## Skipped ({sum(reasons.values())})", "", "| cases | reason |", "|---:|---|"]
        out += [f"| {n} | {_cell(r)} |" for r, n in reasons.most_common()] + [""]
    return "\n".join(out)


def report_files(report, backend_arg: str, golden_arg: str | None = None, accept_partial=False) -> tuple:
    """({file name: bytes}, note or None): ``summary.md`` and the plots; the note says why plots are
    missing (matplotlib not installed)."""
    from . import plots as P
    try:
        pngs = P.error_plots(report)
        note = None
    except ImportError as e:
        missing = isinstance(e, ModuleNotFoundError) and (e.name or "").partition(".")[0] == "matplotlib"
        pngs, note = {}, (NO_MATPLOTLIB if missing else f"plots skipped: matplotlib failed to import ({e})")
    files = dict(pngs)
    files[SUMMARY] = markdown(report, backend_arg, golden_arg, list(pngs), note, accept_partial).encode()
    return files, note
