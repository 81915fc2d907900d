"""Expected failures (``refnorm check --expect-failures FILE``, docs: "Expected failures"): the file's
format and parser (``read_expected_failures``), and how one entry turns a listed case's result into an
expected failure, or into a failure saying how it differs (``expected_outcome``,
``apply_expected_failures``)."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from ..golden import layouts
from ..golden.store import GoldenError
from .judge import SINGULAR
from .results import CaseResult, Report

LAYOUT_NAMES = tuple(layouts.LAYOUTS)


@dataclass(frozen=True)
class ExpectedFailure:
    """One line of an expected-failures file: what a listed case must fail with to count as expected.

    ``fails``: the arrays that fail ("output.y", "grad.x", "state.running_var"; any step), exactly;
    ``error``: instead of ``fails``, a text the case's error message must contain;
    ``diagnosis``: the variant the diagnosis must name (``none``: no known pitfall may match), or None
    (not compared); ``reason``: why, in words; ``platform``: the CPUs it holds on (platform.parse_scope:
    ((flag, wanted), ...); () = every CPU); ``layouts``: the memory layouts it holds in
    (refnorm/golden/layouts.py; every layout unless the line has ``layout=``)."""
    fails: frozenset | None
    error: str | None
    diagnosis: str | None
    reason: str
    platform: tuple = ()
    layouts: frozenset = frozenset(LAYOUT_NAMES)

    def describe(self) -> str:
        from .platform import describe_scope
        what = f"error containing {self.error!r}" if self.error is not None else f"fails={','.join(sorted(self.fails))}"
        return (what + (f" diagnosis={self.diagnosis}" if self.diagnosis is not None else "")
                + (f" platform={describe_scope(self.platform)}" if self.platform else "")
                + (f" layout={','.join(sorted(self.layouts))}" if self.layouts != frozenset(LAYOUT_NAMES) else ""))


FIELDS = ("fails", "error", "diagnosis", "platform", "layout")
EXPECT_FORMAT = ("'CASE-ID fails=ARRAY[,ARRAY...] [diagnosis=VARIANT|none] [platform=[!]FLAG[,...]] "
                 "[layout=[!]LAYOUT[,...]] reason' or "
                 "'CASE-ID error=\"TEXT\" reason' (ARRAY: output.y, grad.x, state.running_var, ...; FLAG: a CPU "
                 "flag such as avx512_fp16; LAYOUT: " + ", ".join(LAYOUT_NAMES) + ")")


def parse_layouts(text: str) -> frozenset:
    """The layouts of a ``layout=`` field: ``channels_last,strided`` (these), ``!contiguous`` (every other
    one). A ValueError names an unknown layout or a mix of both forms."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    neg = [w[1:] for w in words if w.startswith("!")]
    pos = [w for w in words if not w.startswith("!")]
    if not words or (neg and pos):
        raise ValueError(f"layout={text!r}: expected LAYOUT[,LAYOUT...] or !LAYOUT[,!LAYOUT...] with LAYOUT one of "
                         f"{', '.join(LAYOUT_NAMES)}")
    bad = [w for w in neg + pos if w not in LAYOUT_NAMES]
    if bad:
        raise ValueError(f"layout={text!r}: unknown layout {bad[0]!r}; expected one of {', '.join(LAYOUT_NAMES)}")
    return frozenset(LAYOUT_NAMES) - frozenset(neg) if neg else frozenset(pos)


def read_expected_failures(path, flags=None, layout="contiguous") -> dict:
    """Parse an expected-failures file (docs: README, "Expected failures"): one listed case per line,
    ``#`` starts a comment; the fields come first (a value may be quoted), the rest is the reason:

        CASE-ID  fails=output.y,grad.x  [diagnosis=VARIANT|none]  [platform=[!]FLAG,...]  why, in words
        CASE-ID  error="text the error message contains"  why

    ``platform=`` scopes an entry to the CPUs with (``avx512_fp16``) or without (``!avx512_fp16``) a
    numeric flag (check/platform.py); an entry whose scope does not match ``flags`` (default: this
    machine's, platform.cpu()) is left out of the result: ignored for this run. ``layout=`` scopes it to
    memory layouts the same way (``layout=channels_last``, ``layout=!channels_last``; no field: every
    layout); the entries kept are those of ``layout``, the run's (``refnorm check --layout``). A case may
    be listed more than once only with scopes no (CPU, layout) matches together.

    Returns {case id: ExpectedFailure} of the entries that apply. A line without ``fails=`` or
    ``error=``, without a reason, with a misspelt field name or an unknown platform flag, or a case
    listed twice for one platform is a GoldenError naming the line. The first word that is not a field
    begins the reason (it may itself contain "=")."""
    import re
    from . import platform as P
    if flags is None:
        flags = P.cpu()["flags"]
    lines = {}                                   # case id -> line number of each entry (all platforms)
    field_re = re.compile(r"""([A-Za-z_]\w*)=("([^"]*)"|'([^']*)'|(\S+))(\s+|$)""")
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise GoldenError(f"expected-failures file {path!r}: {e.strerror or e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        cid, _, rest = body.partition(" ")
        rest, fields = rest.strip(), {}
        while (m := field_re.match(rest)):
            key = m.group(1)
            if key not in FIELDS:             # the reason begins here ("eps=1e-12 rounds to 0 ..."), unless
                near = difflib.get_close_matches(key, FIELDS, n=1, cutoff=0.6)    # a misspelt field
                if near:
                    raise GoldenError(f"{path}:{n}: unknown field {key!r} (did you mean {near[0]!r}?); "
                                      f"expected {EXPECT_FORMAT}")
                break
            if key in fields:
                raise GoldenError(f"{path}:{n}: field {key!r} given twice")
            fields[key] = next(g for g in m.group(3, 4, 5) if g is not None)
            rest = rest[m.end():]
        if rest[:1] in ("'", '"'):
            raise GoldenError(f"{path}:{n}: unclosed quote in {rest!r}; expected {EXPECT_FORMAT}")
        words = rest.split()
        if ("fails" in fields) == ("error" in fields):
            raise GoldenError(f"{path}:{n}: {cid!r} must record what fails with exactly one of fails= or error=; "
                              f"expected {EXPECT_FORMAT}")
        fails = None
        if "fails" in fields:
            fails = frozenset(f for f in fields["fails"].split(",") if f)
            bad = sorted(f for f in fails if f.partition(".")[0] not in SINGULAR.values() or not f.partition(".")[2])
            if not fails or bad:
                raise GoldenError(f"{path}:{n}: fails={fields['fails']!r}: expected ARRAY[,ARRAY...] with ARRAY "
                                  "output.NAME, grad.NAME or state.NAME")
        if not words:
            raise GoldenError(f"{path}:{n}: {cid!r} has no reason; expected {EXPECT_FORMAT}")
        late = [w for w in words if w.startswith(("platform=", "layout="))]
        if late and late[0] == words[0] and late[0].endswith("="):
            raise GoldenError(f"{path}:{n}: {late[0]} has no value; expected {EXPECT_FORMAT}")
        if late:                                 # it would silently scope nothing: the fields come first
            raise GoldenError(f"{path}:{n}: {late[0]!r} is in the reason (after {words[0]!r}): the fields, "
                              f"platform= and layout= among them, come before the reason; expected {EXPECT_FORMAT}")
        try:
            scope = P.parse_scope(fields["platform"]) if "platform" in fields else ()
        except P.ScopeError as e:
            raise GoldenError(f"{path}:{n}: {e}") from None
        try:
            lays = parse_layouts(fields["layout"]) if "layout" in fields else frozenset(LAYOUT_NAMES)
        except ValueError as e:
            raise GoldenError(f"{path}:{n}: {e}") from None
        for m_, other, other_lays in lines.get(cid, ()):
            if not P.scopes_exclusive(scope, other) and lays & other_lays:
                raise GoldenError(f"{path}:{n}: {cid!r} is listed twice (line {m_}) for the same platform and layout "
                                  f"({', '.join(sorted(lays & other_lays))}): scope the entries with platform= or "
                                  "layout= so that no run matches both")
        lines.setdefault(cid, []).append((n, scope, lays))
        if P.scope_matches(scope, flags) and (layout is None or layout in lays):
            out[cid] = ExpectedFailure(fails, fields.get("error"), fields.get("diagnosis"), " ".join(words), scope,
                                       lays)
    return out


def expected_outcome(c: CaseResult, entry: ExpectedFailure, diagnosed=True) -> None:
    """Apply one expected-failure entry to one case result: ``xfail`` when the case fails exactly as
    recorded (the same failing arrays, or an error containing the recorded text, and the recorded
    diagnosis); otherwise ``failed`` with a message saying how it differs (a new failure of a listed
    case is never hidden by the old entry; a listed case that passes means the list is stale).
    ``diagnosed``: False when the run made no diagnosis (the diagnosis field is then not compared)."""
    c.expected = entry.reason
    listed = f"listed as an expected failure ({entry.describe()}: {entry.reason})"
    if c.status in ("skipped",):
        return
    if c.status in ("passed", "partial"):
        c.status, c.message = "failed", f"{listed} but it {c.status}: remove it from the list"
        return
    diff = []
    if entry.error is not None:
        if c.status != "error":
            diff.append(f"it failed instead of raising (fails={','.join(c.failing_arrays())})")
        elif entry.error not in c.message:
            diff.append("its error differs")
    else:
        if c.status == "error":
            diff.append("it errored instead of failing")
        elif frozenset(c.failing_arrays()) != entry.fails:
            diff.append(f"other arrays fail: fails={','.join(c.failing_arrays())}")
        if not diff and entry.diagnosis is not None and diagnosed:
            got = (c.diagnosis or {}).get("matched") or "none"
            if got != entry.diagnosis:
                diff.append(f"the diagnosis names {got}")
    if diff:                                     # the status stays failed / error: counted as such
        c.message = f"{listed}, but {'; '.join(diff)}: {c.message}"
    else:
        c.status, c.message = "xfail", f"expected failure ({entry.reason}): {c.message}"


def apply_expected_failures(report: Report, expected: dict, known_ids, diagnosed=True) -> None:
    """Apply ``expected`` ({case id: ExpectedFailure}) to every listed case of ``report``
    (``expected_outcome``); an id not in ``known_ids`` (the golden set's; the CLI adds the suites' and the
    generated cases') is an error. Generated and suite cases are matched by their ids as golden ones are."""
    unknown = [c for c in expected if c not in set(known_ids)]
    if unknown:
        raise GoldenError(f"expected failures name case(s) not in the golden set, a suite or the generated "
                          f"cases: {', '.join(unknown)}")
    for c in report.cases:
        if c.id in expected and (getattr(c, "layout", None) or "contiguous") in expected[c.id].layouts:
            expected_outcome(c, expected[c.id], diagnosed)
