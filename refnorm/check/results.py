"""What a check produced, as the user reads it: one golden case's result (``CaseResult``: its status,
message, the verdict of every array) and a run's report (``Report``: the cases, the summary, the
headroom, the JSON written by ``refnorm check --json``), with the one-line messages of a failed or
partial case. The statuses and verdicts are defined in core.py's docstring (docs/tolerances.md,
"Verdicts"); nothing here judges or runs anything."""
from __future__ import annotations

from dataclasses import dataclass, field

from .judge import SINGULAR, _num


@dataclass
class CaseResult:
    id: str
    op: str
    dtype: str
    status: str                      # passed | partial | failed | error | skipped | xfail
    message: str = ""
    contract: str = ""                               # the contract in one line (Contract.describe)
    contract_points: dict | None = None             # the same as JSON values (Contract.as_dict)
    seconds: float = 0.0
    arrays: list = field(default_factory=list)
    unchecked: list = field(default_factory=list)   # "step<i>.<part>.<name>" of the arrays not judged
    unchecked_why: dict = field(default_factory=dict)   # the same keys -> why (not returned, no bound)
    not_returned: list = field(default_factory=list)    # optional statistics outputs the backend does not return
    expected: str = ""                              # why it is an expected failure (--expect-failures), if listed
    diagnosis: dict | None = None                   # failed cases: the pitfall the backend matches (diagnosis.py)
    layout: str = "contiguous"                      # the memory layout the backend was handed
    recipe: str = ""                                # a generated case: its recipe (refnorm.golden.generate)
    own_masks: list = field(default_factory=list)   # "step<i>.input.<name>": keep-masks the backend drew (masks.py)

    @property
    def worst_ratio(self):
        return max((a.ratio for a in self.arrays), default=0.0)

    @property
    def warnings(self):
        return [a for a in self.arrays if a.warning]

    def verdicts(self) -> dict:
        """{verified, failed, unconstrained, unchecked: count of arrays} of this case."""
        n = {v: 0 for v in VERDICTS}
        for a in self.arrays:
            n[a.verdict] += 1
        n["unchecked"] = len(self.unchecked)
        return n

    def failing_arrays(self) -> list:
        """Sorted "output.y", "grad.x", ... of the arrays that failed (at any step)."""
        return sorted({f"{SINGULAR[a.part]}.{a.name}" for a in self.arrays if a.verdict == "failed"})

    def to_json(self):
        return {"id": self.id, "op": self.op, "dtype": self.dtype, "status": self.status, "message": self.message,
                "layout": self.layout, "recipe": self.recipe, "contract": self.contract,
                "contract_points": self.contract_points, "seconds": round(self.seconds, 4), "worst_ratio": _num(self.worst_ratio),
                "verdicts": self.verdicts(), "unchecked": self.unchecked,
                "unchecked_why": self.unchecked_why, "statistics_not_returned": self.not_returned, "unconstrained": [
                    f"step{a.step}.{a.part}.{a.name}" for a in self.arrays if a.verdict == "unconstrained"],
                "weakly_verified": [f"step{a.step}.{a.part}.{a.name}" for a in self.arrays if a.weak],
                "worst_bias": _num(max((a.bias for a in self.arrays), default=0.0)),
                "precision_warnings": [f"step {a.step} {SINGULAR[a.part]} {a.name}: {a.strict_ratio:.3g} x the strict "
                                       "bound" for a in self.warnings],
                "expected": self.expected, "diagnosis": self.diagnosis, "masks_drawn_by_backend": self.own_masks,
                "arrays": [a.to_json() for a in self.arrays]}


VERDICTS = ("verified", "failed", "unconstrained", "unchecked")
JUDGED = ("passed", "partial", "failed", "xfail")      # statuses of cases whose arrays were judged


@dataclass
class Report:
    backend: str
    golden: str
    cases: list = field(default_factory=list)
    seconds: float = 0.0
    platform: dict | None = None     # where it ran (platform.probe): set by platform_info(), at the first report

    def platform_info(self) -> dict:
        """The platform record (CPU model and numeric flags, GPU, library versions: check/platform.py),
        probed once, when first asked for (after the run: the backend's framework is imported by then)."""
        if self.platform is None:
            from . import platform
            self.platform = platform.probe()
        return self.platform

    def count(self, status):
        return sum(c.status == status for c in self.cases)

    @property
    def ok(self):
        """No case failed or errored, at least one was judged, and every judged case passed (every array
        verified) or failed exactly as its expected-failure entry records."""
        return self.verdict == "ok"

    @property
    def verdict(self):
        """"ok" | "partial" (no failure, but some case left an array unconstrained or unchecked) | "failed"
        (some case failed or errored, or no case was judged at all)."""
        if self.count("failed") or self.count("error") or not sum(self.count(s) for s in JUDGED):
            return "failed"
        return "partial" if self.count("partial") else "ok"

    def array_counts(self) -> dict:
        """Arrays by verdict over the judged cases (expected failures included, skipped/errored cases not)."""
        n = {v: 0 for v in VERDICTS}
        for c in self.cases:
            if c.status in JUDGED:
                for k, v in c.verdicts().items():
                    n[k] += v
        return n

    def weak_count(self) -> int:
        """Verified arrays of the judged cases with fewer than half their elements constrained (ArrayResult.weak)."""
        return sum(a.weak for c in self.cases if c.status in JUDGED for a in c.arrays)

    def summary(self):
        return {"backend": self.backend, "golden": self.golden, "cases": len(self.cases),
                "passed": self.count("passed"), "partial": self.count("partial"), "failed": self.count("failed"),
                "skipped": self.count("skipped"), "errors": self.count("error"),
                "expected_failures": self.count("xfail"), "judged": sum(self.count(s) for s in JUDGED),
                "arrays": self.array_counts(), "weakly_verified": self.weak_count(),
                "seconds": round(self.seconds, 2), "ok": self.ok,
                "verdict": self.verdict}

    def headroom(self) -> list:
        """How tight the check is, per (op, dtype): over the verified arrays of the PASSED and PARTIAL
        cases, the worst ratio excess / bound (``worst_ratio``, <= 1) and the headroom 1 / worst_ratio;
        "exact" when every ratio was 0. Rows with no such case are left out.

        What it measures (docs/tolerances.md, section 9, "Headroom"): the excess is the distance from the
        reference to the returned value's rounding interval (precision.excess), 0 for any result inside
        it (a correctly rounded one among them), so "exact" means every element was inside its rounding
        interval, and a headroom h means the worst element could have been h times further OUTSIDE its
        interval and still pass: not that an error h times larger than |got - ref| passes. A result one
        ulp off lands about half an ulp outside its interval, i.e. ulp / (2 * bound) times the bound:
        where the bound is far below the dtype's ulp (float16/bfloat16 outputs computed in float32,
        rms_norm bfloat16: ~3e3x) one ulp off fails although the headroom is huge or "exact"."""
        rows = {}
        for c in self.cases:
            if c.status not in ("passed", "partial"):
                continue
            key = (c.op, c.dtype)
            n, w = rows.get(key, (0, 0.0))
            rows[key] = (n + 1, max([w] + [a.ratio for a in c.arrays if a.verdict == "verified"]))
        order = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}
        return [{"op": op, "dtype": dt, "passed": n, "worst_ratio": _num(w),
                 "headroom": _num(1 / w) if w > 0 else "exact"}
                for (op, dt), (n, w) in sorted(rows.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9)))]

    def to_json(self):
        return {"summary": self.summary(), "platform": self.platform_info(), "headroom": self.headroom(),
                "cases": [c.to_json() for c in self.cases]}


def failure_message(arrays) -> str:
    """One line naming the arrays beyond their bound (the first four) and by how much."""
    bad = [a for a in arrays if not a.passed]

    def one(a):
        if a.ratio > 1:
            return f"step {a.step} {SINGULAR[a.part]} {a.name}: {a.ratio:.3g} x bound"
        return (f"step {a.step} {SINGULAR[a.part]} {a.name}: systematic bias {a.bias:.3g} x its allowance "
                f"({a.bias_where})")
    return "; ".join(one(a) for a in bad[:4])


def partial_message(arrays, unchecked, why) -> str:
    """Why a case is partial: how many arrays were verified, and which were not and why."""
    unc = [a for a in arrays if a.verdict == "unconstrained"]
    ver = sum(a.verdict == "verified" for a in arrays)
    total = len(arrays) + len(unchecked)
    parts = [f"{ver} of {total} arrays verified"]
    if unc:
        parts.append("unconstrained (every element's bound is infinite or >= the array's own scale max|ref|, so "
                     "any value of that size would pass): " + ", ".join(
                         f"step {a.step} {SINGULAR[a.part]} {a.name} (bound up to {a.max_bound:.3g}, scale "
                         f"{a.scale:.3g})" for a in unc))
    if unchecked:
        parts.append("unchecked: " + ", ".join(f"{k} ({why.get(k, 'not judged')})" for k in unchecked))
    return "; ".join(parts)


def merge_reports(reports, name) -> Report:
    """One report of several runs of the same backend (``refnorm check --layout all``: a run per layout;
    each case keeps its ``layout``)."""
    out = Report(reports[0].backend, name, platform=reports[0].platform)
    for r in reports:
        out.cases.extend(r.cases)
        out.seconds += r.seconds
    return out


