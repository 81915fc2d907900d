"""Run the planted backends on the golden set and publish which case caught which.

    python tests/planted/report.py [OUT]      (default OUT: docs/pitfall_detection.md)

``run(mutation, op)`` judges ``EmulatedBackend(mutation)`` on every golden case of ``op`` with the
checker's own ``check_case`` (the loop of ``run_check``), with one difference: a GoldenError raised
while judging one case (the checker's "golden set and reference disagree") is recorded for that case
as status ``aborted`` instead of ending the run, so a backend that corrupts the case's arrays is
reported, not allowed to crash the table. Results are cached per (mutation, op, golden directory).
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field

if __package__ in (None, ""):                       # run as a script: make ``planted`` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from planted.emulated import OPS, EmulatedBackend                      # noqa: E402
from planted.pitfalls import NOT_APPLICABLE, PLANTED, SUPPLEMENTARY, all_planted, pairs   # noqa: E402
from refnorm.check.core import check_case                              # noqa: E402
from refnorm.check.diagnosis import matched_ids                        # noqa: E402
from refnorm.golden import commands, store                             # noqa: E402
from refnorm.golden.store import GoldenError                           # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "golden")
DOC = os.path.join(ROOT, "docs", "pitfall_detection.md")
CAUGHT = ("failed", "error", "aborted")
_PART = {"outputs": "", "grads": "d", "state": ""}


@dataclass
class CaseOutcome:
    id: str
    dtype: str
    status: str                 # passed | failed | error | skipped | aborted (GoldenError)
    ratio: float
    message: str
    over: list = field(default_factory=list)     # arrays beyond their bound: "y", "dx", "running_var", ...
    diagnosis: dict | None = None                # failed cases: refnorm.check.diagnosis's verdict


@dataclass
class Outcome:
    mutation: str | None
    op: str
    cases: list

    @property
    def caught(self):
        return [c for c in self.cases if c.status in CAUGHT]

    @property
    def judged(self):
        return [c for c in self.cases if c.status != "skipped"]

    @property
    def first(self):
        c = self.caught
        return c[0] if c else None

    @property
    def outputs(self):
        seen = []
        for c in self.caught:
            for a in c.over or ([f"({c.status})"] if c.status != "failed" else []):
                if a not in seen:
                    seen.append(a)
        return seen


_CACHE: dict = {}


def run(mutation, op, golden=GOLDEN) -> Outcome:
    key = (mutation, op, os.path.abspath(golden))
    if key in _CACHE:
        return _CACHE[key]
    backend = EmulatedBackend(mutation)
    manifest = store.read_manifest(golden)
    out = []
    for e in manifest["cases"]:
        if e["case"]["op"] != op:
            continue
        case = commands.load_case(golden, e["id"], manifest=manifest)
        try:
            r = check_case(backend, case)
        except GoldenError as err:
            out.append(CaseOutcome(case.id, case.dtype, "aborted", float("nan"),
                                   f"run_check aborted with GoldenError: {err}"))
            continue
        over = []
        for a in r.arrays:
            if not a.passed:
                name = _PART[a.part] + a.name
                if name not in over:
                    over.append(name)
        out.append(CaseOutcome(r.id, r.dtype, r.status, r.worst_ratio, r.message, over, r.diagnosis))
    res = Outcome(mutation, op, out)
    _CACHE[key] = res
    return res


def proposal_outcome(planted, directory=None):
    """Build the planted row's proposed golden case into a scratch directory; return
    (case id, correct backend's CaseOutcome, mutant's CaseOutcome)."""
    case = planted.proposal()
    with tempfile.TemporaryDirectory() as tmp:
        d = directory or os.path.join(tmp, "golden")
        commands.build(d, cases=[case])
        good = run(None, case.op, d).cases[0]
        bad = run(planted.mutation, case.op, d).cases[0]
        for k in [k for k in _CACHE if k[2] == os.path.abspath(d)]:
            del _CACHE[k]
    return case.id, good, bad


# ------------------------------------------------------------------------------------ diagnosis
def same_mechanism(p):
    """The pitfall ids that share ``p``'s mutation (A01/A02 share one_pass_clamp; A05-A09 share
    one_pass_noclamp; C01/C05 share sq_in_d; B04/B05 share eps_in_d; ...): naming any of them names
    the mechanism that was planted."""
    return {q.pitfall_id for q in all_planted() if q.mutation == p.mutation}


def case_label(c):
    """What the diagnosis named on one failed case: the matched variant's pitfall ids, or '-'."""
    d = c.diagnosis or {}
    return "/".join(d["pitfalls"]) if d.get("matched") else "-"


@dataclass
class Naming:
    planted: object
    op: str
    failed: int                  # failed cases (the ones diagnosed; errors are not diagnosed)
    correct: int                 # failed cases whose diagnosis names one of same_mechanism(planted)
    label: str                   # the most frequent case_label over the failed cases
    caught: int
    wrong: int = 0               # failed cases whose diagnosis names a match that is not the planted one

    @property
    def named(self):
        """Named correctly: more than half of the failed cases name the planted mechanism."""
        return self.failed > 0 and 2 * self.correct > self.failed


def naming(p, op) -> Naming:
    o = run(p.mutation, op)
    failed = [c for c in o.cases if c.status == "failed"]
    ok = same_mechanism(p)
    correct = sum(bool(matched_ids(c.diagnosis) & ok) for c in failed)
    wrong = sum(bool(matched_ids(c.diagnosis)) and not matched_ids(c.diagnosis) & ok for c in failed)
    labels = Counter(case_label(c) for c in failed)
    label = max(labels.items(), key=lambda kv: (kv[1], kv[0] != "-"))[0] if labels else "-"
    return Naming(p, op, len(failed), correct, label, len(o.caught), wrong)


def naming_rows(planted):
    """(Naming per caught (row, op) run, per-row verdict {row id: all its caught runs named})."""
    runs = [naming(p, op) for p, op in pairs(planted) if run(p.mutation, op).caught]
    rows = {}
    for n in runs:
        rows[n.planted.pitfall_id] = rows.get(n.planted.pitfall_id, True) and n.named
    return runs, rows


# ------------------------------------------------------------------------------------ the document
def _fmt(r):
    if r != r:
        return "n/a"
    if r == float("inf"):
        return "inf"
    return f"{r:.3g}"


def _row(p, op):
    o = run(p.mutation, op)
    f = o.first
    first = f"`{f.id}`" if f else "-"
    ratio = (_fmt(f.ratio) if f.status == "failed" else f.status) if f else "-"
    outs = ", ".join(o.outputs) if f else "-"
    return (f"| {p.pitfall_id} | {op} | `{p.mutation}`: {p.description} | {len(o.caught)} / {len(o.judged)} | "
            f"{first} | {ratio} | {outs} |")


def render() -> str:
    L = []
    man = store.read_manifest(GOLDEN)
    n_cases = {op: sum(e["case"]["op"] == op for e in man["cases"]) for op in OPS}
    L += ["# Pitfall detection: planted bugs vs. the golden set",
          "",
          "Generated by `python tests/planted/report.py` (the same runs as `tests/test_planted.py`). Every row is",
          "the emulated fused float32 kernel of `tests/planted/emulated.py`, correct except for one planted",
          "mutation, judged by `refnorm.check` (strict contract, block reduction model) on every golden case of",
          "the op. \"caught / run\": golden cases of that op the check fails (status failed, error, or aborted)",
          "out of those judged. \"first catching case\": the first in manifest order, with its worst ratio",
          "(excess / bound; > 1 fails). \"outputs\": every array beyond its bound in any catching case (d* = a",
          "gradient). Row ids are those of the catalogue, [pitfalls.md](pitfalls.md).",
          "",
          f"Golden set: `golden/` ({', '.join(f'{op} {n_cases[op]}' for op in OPS)} cases).",
          ""]
    # ---- the correct backend
    L += ["## 1. The otherwise-correct backend", "",
          "`EmulatedBackend()` (no mutation): inputs upcast to float32 (float64 for float64 cases), two-pass",
          "pairwise statistics, rstd = 1/sqrt(var + eps), outputs rounded once to the case dtype, hand-written",
          "float32 backward, float32 running statistics. Worst ratio per op and dtype (must stay <= 1);",
          "\"partial\": no array failed, but an ill-posed array (its bound at least its own scale, e.g. dweight",
          "on constant rows at eps 1e-12) verified nothing:",
          "",
          "| op | cases | passed | partial | failed | errors | float64 | float32 | float16 | bfloat16 |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for op in OPS:
        o = run(None, op)
        w = defaultdict(float)
        for c in o.cases:
            w[c.dtype] = max(w[c.dtype], c.ratio)
        cnt = lambda s: sum(c.status == s for c in o.cases)            # noqa: E731
        L.append(f"| {op} | {len(o.cases)} | {cnt('passed')} | {cnt('partial')} | {cnt('failed')} | {cnt('error')} | "
                 + " | ".join(_fmt(w[d]) if d in w else "-" for d in ("float64", "float32", "float16", "bfloat16"))
                 + " |")
    L.append("")
    # ---- planted catalogue rows
    caught_pairs = [(p, op) for p, op in pairs(PLANTED) if run(p.mutation, op).caught]
    missed = [(p, op) for p, op in pairs(PLANTED) if not run(p.mutation, op).caught]
    ids = sorted({p.pitfall_id for p in PLANTED})
    ids_caught = sorted({p.pitfall_id for p, _ in caught_pairs})
    L += ["## 2. Catalogue rows planted in the emulated kernel", "",
          f"{len(ids)} of the {len(ids) + len(NOT_APPLICABLE)} rows apply to these ops; planted as "
          f"{len(pairs(PLANTED))} (row, op) runs. Caught: {len(caught_pairs)} runs, covering {len(ids_caught)} "
          f"rows; not caught: {len(missed)} runs ({', '.join(sorted({p.pitfall_id for p, _ in missed})) or 'none'}, "
          "section 4).", "",
          "| id | op | mutation | caught / run | first catching case | its worst ratio | outputs that caught it |",
          "|---|---|---|---|---|---|---|"]
    L += [_row(p, op) for p, op in pairs(PLANTED)]
    L.append("")
    L += ["## 3. Supplementary: the research's mutant classes that are not catalogue rows", "",
          "| id | op | mutation | caught / run | first catching case | its worst ratio | outputs that caught it |",
          "|---|---|---|---|---|---|---|"]
    L += [_row(p, op) for p, op in pairs(SUPPLEMENTARY)]
    L.append("")
    # ---- not caught
    L += ["## 4. Applicable rows the golden set does not catch", ""]
    for p, op in missed + [(p, op) for p, op in pairs(SUPPLEMENTARY) if not run(p.mutation, op).caught]:
        L.append(f"* **{p.pitfall_id}** ({op}, `{p.mutation}`): {p.why_not or 'no reason recorded'}.")
        if p.proposal is not None:
            cid, good, bad = proposal_outcome(p)
            L.append(f"  Proposed golden case: `{cid}`. Measured on a scratch golden set built from that row: "
                     f"the correct emulated backend {good.status} (worst ratio {_fmt(good.ratio)}); the planted "
                     f"mutation {bad.status}"
                     + (f" ({_fmt(bad.ratio)} x bound on {', '.join(bad.over)})" if bad.status == "failed"
                        else f" ({bad.message})") + ".")
        else:
            L.append("  No golden case proposed (see the reason).")
    L.append("")
    # ---- not applicable
    L += ["## 5. Rows that do not apply to these ops (not planted)", "",
          "| id | reason |", "|---|---|"]
    L += [f"| {k} | {v} |" for k, v in sorted(NOT_APPLICABLE.items())]
    L.append("")
    L += ["## 6. Notes on the runs", "", *NOTES, ""]
    L += diagnosis_section()
    L += beyond_section()
    from planted import distributed
    L += [""] + distributed.section()
    return "\n".join(L)


def beyond_section():
    """Section 8: bugs the stored set cannot reach, caught by a generated suite or a memory layout."""
    from planted import beyond
    L = ["## 8. Beyond the stored set: generated suites and memory layouts", "",
         "Bugs whose trigger no stored case has, planted in the small float32 kernel of "
         "`examples/tiny_backend.py` (layer_norm and rms_norm; `tests/planted/beyond.py`), each judged on the "
         "golden set as it is and then by the generated suite (`refnorm check --suite NAME`) or the layout "
         "(`refnorm check --layout NAME`) named for it. \"caught / judged\": cases failed or errored / "
         "cases judged. F08's 2^23 + 1 rows are judged in blocks (the streaming judge); the `limits` suite's "
         "cases of numel > 2^31 and > 2^32 (F07, F10) need more memory than this machine has: they are "
         "skipped there with the memory they need (F07 is therefore not planted here, and no figure is "
         "given for it).", "",
         "| id | planted bug | golden set: caught / judged | caught by | caught / judged | worst error / bound |",
         "|---|---|---|---|---|---|"]
    for pid, bug, g, where, r, worst in beyond.rows(GOLDEN):
        L.append(f"| {pid} | {bug} | {g} | {where} | {r} | {_fmt(worst)} |")
    L.append("")
    return L


def diagnosis_section():
    runs, rows = naming_rows(PLANTED)
    sruns, _ = naming_rows(SUPPLEMENTARY)
    n_ok = sum(n.named for n in runs)
    r_ok = sum(rows.values())
    L = ["## 7. Diagnosis: which pitfall the check names", "",
         "For every failed case of the runs above, `refnorm.check.diagnosis` evaluates the float64 pitfall "
         "variants of `refnorm/pitfalls/` and names the one the planted backend matches within the case's "
         "derived bound, and fits it clearly better than every other mechanism and than no pitfall (section 10; "
         "docs/tolerances.md, section \"Diagnosis\"). \"named as\": the most frequent "
         "diagnosis over the run's failed cases (the matched variant's pitfall ids; `-`: no known pitfall "
         "matches). \"named correctly\": failed cases whose diagnosis (the named variant, or one "
         "indistinguishable from it on that case) lists the planted row's id or an id planted with the same "
         "mutation (A01/A02; A05-A09; B04/B05; C01/C05; C06/C09 share a variant). A run counts as named when "
         "more than half of its failed cases are; a row when each of its caught runs is. Errored cases (G03's "
         "in-place write, F12's wrong shape) are not diagnosed.", "",
         f"**Named correctly: {n_ok} of {len(runs)} caught runs ({100 * n_ok / len(runs):.0f}%), {r_ok} of "
         f"{len(rows)} caught catalogue rows ({100 * r_ok / len(rows):.0f}%).**", "",
         f"Failed cases named with another pitfall than the planted one: {sum(n.wrong for n in runs)} of "
         f"{sum(n.failed for n in runs)} (catalogue rows); the rest of the not-named cases say \"no known "
         "pitfall matches\".", "",
         "| pitfall | op | mutation | detected by (cases failed / caught) | named as | named correctly | "
         "named wrongly |",
         "|---|---|---|---|---|---|---|"]
    for n in runs + sruns:
        L.append(f"| {n.planted.pitfall_id} | {n.op} | `{n.planted.mutation}` | {n.failed} / {n.caught} | "
                 f"{n.label} | {n.correct} / {n.failed}{' ✓' if n.named else ''} | {n.wrong} |")
    L.append("")
    return L


NOTES = [
    "* **G03** (dX written into the caller's dY): the checker hands float32/float16/float64 case arrays to "
    "the backend read-only, so the in-place write raises (status error). The bfloat16 arrays are writable "
    "(`as_case_dtype` makes a fresh array): the write succeeds, the checker then recomputes the reference "
    "from the clobbered cotangent, `_check_golden_agrees` raises GoldenError (\"the golden set and this "
    "refnorm disagree\") and `run_check` aborts the whole run. Status `aborted` above is that GoldenError, "
    "caught per case by this report's loop. A backend bug is reported as a golden-set fault, and for steps "
    "after the first (no golden comparison) the clobbered arrays would silently become the reference's "
    "inputs.",
    "* Rows that share a mutation (A01/A02; A05-A08; C01/C05 on rms_norm; B04/B05 on different ops) are "
    "listed once per row; the runs are the same and are computed once. A10 is planted in both readings "
    "(padded zeros entering the sum of squares; the block length as the divisor) and H10 in both "
    "directions (layer_norm as rms_norm, rms_norm as layer_norm).",
    "* `inferred` in a description: the row does not state the mechanism; the mutation is a reading of "
    "the thread, as the catalogue marks it (pitfalls.md, *(inferred)*), or as stated in the description.",
    "* Checker side note seen in these runs: `precision.rounding_interval` calls `np.nextafter` on the "
    "largest finite value without `np.errstate(over=...)`, so a returned +-max (the truncating R-trunc "
    "mutant returns 65504 for an fp16 value that should overflow) emits `RuntimeWarning: overflow "
    "encountered in nextafter`; under `-W error` that becomes a checker error instead of a verdict.",
    "* Mechanisms that live in every centred kernel (A01, A10) are also planted in group_norm, batch_norm "
    "and instance_norm, and C01/C10/F13 in both layer_norm and rms_norm; each (row, op) pair is asserted "
    "separately by tests/test_planted.py.",
]


def write(path=DOC):
    text = render()
    if os.path.exists(path):                # section 10 is folds.py's (issue 21): kept as it stands
        from planted import folds
        nine = folds.section(open(path).read())
        text = text + ("\n" + nine + "\n" if nine else "")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


if __name__ == "__main__":
    print(write(sys.argv[1] if len(sys.argv) > 1 else DOC))
