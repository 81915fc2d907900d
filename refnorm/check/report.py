"""Text reports of a check: the per-op/dtype table, each failure's worst elements with a command that
reproduces it, and the skip reasons. (JSON: ``Report.to_json()``.)"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

import numpy as np

STATUSES = ("passed", "partial", "failed", "skipped", "error", "xfail")


def _fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.3g}"


DTYPE_ORDER = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}


def table_rows(report) -> list:
    """One dict per (op, dtype), sorted: op, dtype, cases, the count of each status, the arrays by
    verdict (verified, unconstrained, unchecked), worst_ratio (the worst error as a fraction of its
    bound) and worst_err_u (in units of the dtype's unit roundoff), over the verified and failed arrays
    of passed, partial and failed cases (None when there are none: unconstrained arrays verify nothing
    and are left out)."""
    rows = defaultdict(list)
    for c in report.cases:
        rows[(c.op, c.dtype)].append(c)
    out = []
    for (op, dt), cs in sorted(rows.items(), key=lambda kv: (kv[0][0], DTYPE_ORDER.get(kv[0][1], 9))):
        n = Counter(c.status for c in cs)
        judged = [a for c in cs if c.status in ("passed", "partial", "failed") for a in c.arrays
                  if a.verdict != "unconstrained"]                                       # xfail left out
        arrays = Counter()
        for c in cs:
            if c.status in ("passed", "partial", "failed", "xfail"):
                arrays.update(c.verdicts())
        out.append({"op": op, "dtype": dt, "cases": len(cs), **{k: n[k] for k in STATUSES},
                    "verified": arrays["verified"], "unconstrained": arrays["unconstrained"],
                    "unchecked": arrays["unchecked"],
                    "worst_ratio": max((a.ratio for a in judged), default=None),
                    "worst_err_u": max((a.err_u for a in judged if not math.isnan(a.err_u)), default=None)})
    return out


def table(report) -> str:
    """One row per (op, dtype): cases, passed, failed, skipped, errors, worst ratio to the bound, and the
    worst error in units of the output dtype's unit roundoff (relative to each array's largest value)."""
    head = f"{'op':24s} {'dtype':9s} {'cases':>5s} {'pass':>5s} {'part':>5s} {'fail':>5s} {'skip':>5s} " \
           f"{'error':>5s} {'xfail':>5s} {'arrays ok/unc/unch':>18s} {'worst/bound':>11s} {'worst err (u)':>13s}"
    lines = [head, "-" * len(head)]
    for r in table_rows(report):
        arrays = f"{r['verified']}/{r['unconstrained']}/{r['unchecked']}"
        lines.append(f"{r['op']:24s} {r['dtype']:9s} {r['cases']:5d} {r['passed']:5d} {r['partial']:5d} "
                     f"{r['failed']:5d} {r['skipped']:5d} {r['error']:5d} {r['xfail']:5d} {arrays:>18s} "
                     f"{_fmt(r['worst_ratio']):>11s} {_fmt(r['worst_err_u']):>13s}")
    lines.append("arrays ok/unc/unch: verified / unconstrained (bound >= the array's scale: nothing verified) / "
                 "unchecked (not returned or no bound)")
    return "\n".join(lines)


HEADROOM_NOTE = ("headroom: how many times further outside its rounding interval the worst element could be and "
                 "still pass (exact: every element inside it); not a bound on |error|: one ulp off is ulp/(2 bound) "
                 "x the bound, often > 1 in float16/bfloat16 (docs/tolerances.md, section 9, Headroom)")


def headroom_table(report) -> str:
    """Per op and dtype, over the passed cases: the worst ratio excess / bound and the headroom (1 / that;
    "exact" when every element was inside its rounding interval: Report.headroom says what it means)."""
    rows = report.headroom()
    if not rows:
        return ""
    head = f"{'HEADROOM op':24s} {'dtype':9s} {'passed':>6s} {'worst/bound':>11s} {'headroom':>9s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        h = r["headroom"] if isinstance(r["headroom"], str) else _fmt(r["headroom"])
        lines.append(f"{r['op']:24s} {r['dtype']:9s} {r['passed']:6d} {_fmt(r['worst_ratio']):>11s} {h:>9s}")
    lines.append(HEADROOM_NOTE)
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
        dt = f"{a.returned_dtype}, judged as {a.dtype}" if a.returned_dtype else a.dtype
        out.append(f"  step {a.step} {what} {a.name} ({dt}): {_fmt(a.ratio)} x bound, "
                   f"{a.over} of {a.size} elements over; error up to {_fmt(a.err_u)} u")
        if getattr(a, "note", ""):
            out.append(f"      {a.note}")
        if a.bias > 1:
            out.append(f"      systematic bias: signed error {_fmt(a.bias)} x what unbiased rounding and the bound "
                       f"allow, over {a.bias_where} (bias test, false-alarm rate 1e-9 per case)")
        for idx, got, exp, bnd in a.worst:
            with np.errstate(all="ignore"):
                err = abs(got - exp)
            out.append(f"      at {list(idx)}: got {got!r}, expected {exp!r}, |error| {err:.3g}, bound {bnd:.3g}")
    return out


def reproduce(case_id, backend_arg: str | None, golden_arg: str | None = None, *, layout="contiguous", recipe="",
              world_size=None) -> str:
    """The command that judges one case again (a generated case by its recipe; a distributed one with its
    world size). ``backend_arg`` None: the backend is an object built in Python (``from_torch`` in a
    script), which no command line can load: the ``refnorm.testing`` call that judges it again."""
    if backend_arg is None:
        if recipe:
            return f"refnorm.testing.assert_generated_case_passes(backend, {recipe!r})"
        extra = "".join(f", {k}={v!r}" for k, v in (("golden", golden_arg), ("layout", layout))
                        if v and v != "contiguous")
        return f"refnorm.testing.assert_backend_passes(backend, case_ids=[{case_id!r}]{extra})"
    if recipe:                                      # its text names its layout (generate.with_layout)
        ws = f" --world-size {world_size}" if world_size else ""
        return f"refnorm check --backend {backend_arg}{ws} --generate '{recipe}'"
    g = f" --golden {golden_arg}" if golden_arg else ""
    lay = f" --layout {layout}" if layout != "contiguous" else ""
    return f"refnorm check --backend {backend_arg}{g} --case {case_id}{lay}"


def case_text(c, backend_arg: str | None, golden_arg: str | None = None) -> str:
    """One failed, errored, partial or expected-failure case: its message, worst elements and reproduce
    command."""
    lay = "" if getattr(c, "layout", "contiguous") == "contiguous" else f", layout {c.layout}"
    out = [f"{c.status.upper()} {c.id} [{c.dtype}{lay}, contract {c.contract or '-'}]: {c.message}"]
    if diagnosis_line(c):
        out.append(diagnosis_line(c))
    out += array_lines(c.arrays)
    out.append("  reproduce: " + reproduce(c.id, backend_arg, golden_arg, layout=getattr(c, "layout", "contiguous"),
                                           recipe=getattr(c, "recipe", ""), world_size=getattr(c, "world_size", None)))
    return "\n".join(out)


def failures(report, backend_arg: str | None, golden_arg: str | None = None, limit: int = 50) -> str:
    """Each failed or errored case: what failed, the worst elements, and the command to reproduce it."""
    out = []
    bad = [c for c in report.cases if c.status in ("failed", "error", "xfail")]
    for c in bad[:limit]:
        out.append(case_text(c, backend_arg, golden_arg))
    if len(bad) > limit:
        out.append(f"... and {len(bad) - limit} more failed or errored cases (see --json)")
    return "\n".join(out)


def partials(report, limit: int = 20) -> str:
    """The partial cases (nothing failed, but not every array verified): which arrays were left
    unverified and why, grouped by that reason, so a user sees what was not checked."""
    cases = [c for c in report.cases if c.status == "partial"]
    if not cases:
        return ""
    out = [f"PARTIAL {c.id} [{c.dtype}]: {c.message}" for c in cases[:limit]]
    if len(cases) > limit:
        out.append(f"... and {len(cases) - limit} more partial cases (see --json)")
    return "\n".join(out)


def conversions(report) -> str:
    """A note per (op, dtype, returned dtype) when arrays came back in another dtype than the case's
    and were judged after rounding to the case dtype (core: the conversion rule)."""
    agg = Counter()
    for c in report.cases:
        for a in c.arrays:
            if a.returned_dtype:
                agg[(c.op, c.dtype, a.returned_dtype)] += 1
    return "\n".join(f"NOTE {op} {dt}: {n} array(s) returned as {rd}, judged as {dt} after rounding to nearest"
                     for (op, dt, rd), n in sorted(agg.items()))


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
             f"{len(cs)} case(s); within the declared "
             f"{contract.split('/')[0] if ';' not in contract else '(' + contract + ')'} contract "
             f"(intermediates held in {dt})"
             for (op, dt, name, contract), (n, cs, w) in sorted(agg.items())]
    return "\n".join(lines)


_WHAT = {"outputs": "output", "grads": "grad", "state": "state"}
WEAK_NOTE = ("verified, but fewer than half its elements constrained (their bound below the array's scale "
             "max|ref|): what it verifies, it verifies on those elements only")


def weak_groups(report) -> list:
    """[(op, dtype, array, cases, least constrained fraction)] of the weakly verified arrays (ArrayResult.weak)
    of the judged cases, sorted."""
    agg = {}
    for c in report.cases:
        for a in c.arrays:
            if a.weak and c.status in ("passed", "partial", "failed", "xfail"):
                key = (c.op, c.dtype, f"{_WHAT[a.part]} {a.name}")
                n, f = agg.get(key, (0, 1.0))
                agg[key] = (n + 1, min(f, a.constrained_fraction))
    return [(*k, n, f) for k, (n, f) in sorted(agg.items())]


def weak(report) -> str:
    """One line per op, dtype and array verified weakly (WEAK_NOTE), with its least constrained fraction."""
    from .judge import percent
    return "\n".join(f"WEAKLY VERIFIED {op} {dt} {name}: in {n} case(s), down to {percent(f)} of its elements "
                     f"constrained ({WEAK_NOTE})" for op, dt, name, n, f in weak_groups(report))


def skips(report) -> str:
    reasons = Counter(c.message for c in report.cases if c.status == "skipped")
    return "\n".join(f"SKIPPED {n} case(s): {r}" for r, n in reasons.most_common())


def platform_line(report) -> str:
    """'platform: CPU (arch; numeric flags: ...); GPU ...; numpy X, jax Y' (check/platform.py)."""
    from .platform import describe
    return describe(report.platform_info())


def summary_line(report, accept_partial=False) -> str:
    """The last line: the verdict (OK, PARTIAL, FAILED; "OK (partial accepted)" with --accept-partial),
    the case counts and the arrays by verdict."""
    s = report.summary()
    verdict = {"ok": "OK", "partial": "PARTIAL", "failed": "FAILED"}[report.verdict]
    if verdict == "PARTIAL" and accept_partial:
        verdict = "OK (partial accepted)"
    extra = "" if s["judged"] else " (no case was judged: nothing is verified)"
    xf = f", {s['expected_failures']} expected failures" if s["expected_failures"] else ""
    a = s["arrays"]
    weak = f" ({s['weakly_verified']} weakly)" if s["weakly_verified"] else ""
    arrays = (f"; arrays: {a['verified']} verified{weak}, {a['failed']} failed, {a['unconstrained']} unconstrained, "
              f"{a['unchecked']} unchecked")
    return (f"refnorm check: {verdict}: backend {s['backend']}: {s['passed']} passed, {s['partial']} partial, "
            f"{s['failed']} failed, {s['errors']} errors{xf}, {s['skipped']} skipped of {s['cases']} cases"
            f"{arrays} in {s['seconds']:.1f} s{extra}")


# --------------------------------------------------------------- the compact default (refnorm check)
_VARIES = re.compile(r"\b(?:float64|float32|float16|bfloat16)\b|[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def reason_key(message: str) -> str:
    """A skip reason with its dtype names and numbers blanked: reasons that differ only in those (the
    same missing feature for float16 and bfloat16, for size=2 and size=4, for eps=1e-5 and 1e-6) share
    one key."""
    return _VARIES.sub("#", message)


def skip_groups(report) -> list:
    """The skipped cases grouped by reason_key, most cases first: [(cases, distinct reasons, the most
    frequent reason of the group)]."""
    groups = {}
    for c in report.cases:
        if c.status == "skipped":
            groups.setdefault(reason_key(c.message), Counter())[c.message] += 1
    out = [(sum(g.values()), len(g), g.most_common(1)[0][0]) for g in groups.values()]
    return sorted(out, key=lambda t: (-t[0], t[2]))


def grouped_skips(report, width: int = 200) -> str:
    """One line per group of skip reasons (skip_groups): its case count and one reason, cut at ``width``
    characters, with how many variants it stands for (``--verbose`` lists every reason)."""
    lines = []
    for n, variants, reason in skip_groups(report):
        more = f" [and {variants - 1} variant(s) of this reason differing in a dtype or number]" if variants > 1 else ""
        text = reason if len(reason) <= width else reason[:width - 3] + "..."
        lines.append(f"SKIPPED {n} case(s): {text}{more}")
    return "\n".join(lines)


def short_failures(report, backend_arg: str, golden_arg: str | None = None, limit: int = 20, width: int = 220) -> str:
    """Per failed or errored case (at most ``limit``): one line with its message cut at ``width``, and the
    command that reproduces it (--verbose adds the worst elements and the diagnosis)."""
    bad = [c for c in report.cases if c.status in ("failed", "error")]
    out = []
    for c in bad[:limit]:
        msg = c.message if len(c.message) <= width else c.message[:width - 3] + "..."
        out.append(f"{c.status.upper()} {c.id} [{c.dtype}]: {msg}")
        out.append("  reproduce: " + reproduce(c.id, backend_arg, golden_arg, layout=getattr(c, "layout", "contiguous"),
                                               recipe=getattr(c, "recipe", ""),
                                               world_size=getattr(c, "world_size", None)))
    if len(bad) > limit:
        out.append(f"... and {len(bad) - limit} more failed or errored cases (--verbose, --json)")
    return "\n".join(out)


def unverified_groups(report) -> list:
    """[(what, cases)] over the partial cases, most cases first: each array left unverified, by part,
    name and why ("unchecked grads.x: not returned (the backend is forward-only)", "unconstrained
    grads.weight"), counted once per case."""
    n = Counter()
    for c in report.cases:
        if c.status != "partial":
            continue
        seen = {f"unconstrained {a.part}.{a.name}" for a in c.arrays if a.verdict == "unconstrained"}
        for key in c.unchecked:
            step, _, name = key.partition(".")
            seen.add(f"unchecked {name}: {c.unchecked_why.get(key, 'not judged')}")
        n.update(seen)
    return sorted(n.items(), key=lambda kv: (-kv[1], kv[0]))


def compact_notes(report, limit: int = 8) -> str:
    """One line each, where there is something: the partial cases by op, with the arrays left unverified
    and why (at most ``limit`` lines, unverified_groups), the weakly verified arrays, the expected failures, the precision warnings
    and dtype conversions (counts; --verbose lists them) and the tightest headroom."""
    out = []
    partial = Counter(c.op for c in report.cases if c.status == "partial")
    if partial:
        by_op = ", ".join(f"{op} {n}" for op, n in sorted(partial.items()))
        out.append(f"PARTIAL {sum(partial.values())} case(s) (nothing failed, some array unconstrained or unchecked): "
                   f"{by_op}")
        out += [f"  {what} in {n} case(s)" for what, n in unverified_groups(report)[:limit]]
    declared = Counter(c.contract for c in report.cases if c.contract and ";" in c.contract)
    out += [f"CONTRACT {text}: {n} case(s)" for text, n in sorted(declared.items())]   # beyond the presets
    wk = weak_groups(report)
    if wk:
        out.append(f"WEAKLY VERIFIED {sum(g[3] for g in wk)} array(s) ({len(wk)} op/dtype/array): {WEAK_NOTE}")
    xf = [c for c in report.cases if c.status == "xfail"]
    if xf:
        out.append(f"XFAIL {len(xf)} expected failure(s), each failing exactly as its list entry records")
    wn = {(c.op, c.dtype, a.name) for c in report.cases for a in c.warnings}
    if wn:
        out.append(f"PRECISION WARNING {len(wn)} array(s) (op, dtype, name) beyond the strict contract, within the "
                   f"declared relaxed one, in {len({(o, d) for o, d, _ in wn})} op/dtype row(s)")
    conv = {}
    for c in report.cases:
        for a in c.arrays:
            if a.returned_dtype:
                conv.setdefault((a.returned_dtype, c.dtype), []).append(c.op)
    for (rd, dt), ops in sorted(conv.items()):
        out.append(f"NOTE {len(ops)} array(s) returned as {rd}, judged as {dt} after rounding to nearest "
                   f"({len(set(ops))} op(s))")
    rows = [r for r in report.headroom() if not isinstance(r["headroom"], str)]
    if rows:
        r = min(rows, key=lambda r: r["headroom"])
        out.append(f"HEADROOM smallest {_fmt(r['headroom'])} ({r['op']} {r['dtype']}): worst/bound {_fmt(r['worst_ratio'])}")
    if out:
        out.append("details: --verbose (each partial case, failure with its worst elements and reproduce command, "
                   "expected failure, warning, note, skip reason and the HEADROOM table), --json")
    return "\n".join(out)


def compact_table(report) -> str:
    """``table`` without the rows whose every case was skipped (the SKIPPED lines give their reasons),
    with a line saying how many rows it left out."""
    full = table(report).split("\n")
    head, rule, body, legend = full[0], full[1], full[2:-1], full[-1]
    rows = table_rows(report)
    kept = [line for line, r in zip(body, rows) if r["skipped"] < r["cases"]]
    out = [head, rule] + kept + [legend]
    if len(kept) < len(rows):
        out.append(f"({len(rows) - len(kept)} op/dtype row(s) whose every case was skipped are left out: --verbose "
                   "shows them)")
    return "\n".join(out)


def compact(report, backend_arg: str, golden_arg: str | None = None) -> str:
    """The default text of ``refnorm check`` (--verbose prints every detail instead): the per op/dtype
    table, the skips grouped by reason, the failures one line each, one line per kind of note. The
    platform and summary lines follow it (cli)."""
    parts = [compact_table(report), grouped_skips(report), short_failures(report, backend_arg, golden_arg),
             compact_notes(report)]
    return "\n".join(p for p in parts if p)
