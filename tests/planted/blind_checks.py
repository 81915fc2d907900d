"""The checks the tests of the held-out blind kernels share (tests/test_blind.py).

Each blind set (tests/planted/blind*.py) is a kernel class taking ``bug`` (None: correct) and a catalogue
``BUGS[name] = (op, mechanism, description, source)``; its test file names, for each bug, a small golden case
it fails and an array that must be among the failed ones there (``caught_by[bug] = (case id, array)``). The
diagnosis is not looked at here (the lead measures it on these held-out sets)."""
from __future__ import annotations

import os

import pytest

from refnorm.check.core import run_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "golden")


def check_catalogue(bugs, caught_by, ops, labels, sizes):
    """Every bug names one of ``ops``, a label of ``labels`` (or None), a description and a source, and a
    catching case of its own op; ``len(bugs)`` is within ``sizes`` (lowest, highest); every op has a bug."""
    lo, hi = sizes
    assert lo <= len(bugs) <= hi
    assert set(caught_by) == set(bugs)
    for name, (op, mechanism, description, source) in bugs.items():
        assert op in ops, name
        assert mechanism is None or mechanism in labels, (name, mechanism)
        assert description and source, name
        assert caught_by[name][0].startswith(op + "/"), name
    assert {op for op, *_ in bugs.values()} == set(ops)


def cited(bugs):
    """The bugs whose source is a public report (not a "pattern: ...")."""
    return [n for n, (*_, source) in bugs.items() if not source.startswith("pattern:")]


def check_unknown_bug_is_refused(kernel_class):
    with pytest.raises(ValueError, match="unknown bug 'no_such_bug'"):
        kernel_class("no_such_bug")


def check_correct_kernel(kernel, caught_by, *, case_ids=None, ops=None, at_least=0, nothing_constrained=()):
    """The correct ``kernel`` passes, or is partial only for arrays the golden case itself leaves
    unconstrained (never for unchecked ones), and verifies some array of every case judged, except the cases
    of ``nothing_constrained`` (whose every array is unconstrained: they verify none).

    ``case_ids``: exactly these cases, every one judged (none skipped). ``ops``: every golden case of these
    ops, at least ``at_least`` of them, a case skipped only for setting an option added later that the
    kernel does not declare, and every case of ``caught_by`` passed outright."""
    report = run_check(kernel, GOLDEN, case_ids=case_ids, ops=ops, diagnose=False)
    if case_ids is not None:
        assert len(report.cases) == len(case_ids)
    assert len(report.cases) >= at_least

    def allowed(c):
        return c.status in ("passed", "partial") or (
            ops is not None and c.status == "skipped" and "option" in c.message)
    bad = [(c.id, c.status, c.failing_arrays(), c.message) for c in report.cases if not allowed(c)]
    assert not bad
    for c in report.cases:
        if c.status == "skipped":
            continue
        assert not c.unchecked, (c.id, c.unchecked)            # partial for unconstrained arrays only
        verified = any(a.verdict == "verified" for a in c.arrays)
        assert verified != (c.id in nothing_constrained), c.id
    if ops is not None:
        passed = {c.id for c in report.cases if c.status == "passed"}
        assert {case for case, _ in caught_by.values()} <= passed      # every catching case passes outright


def check_bug_is_caught(kernel_class, bug, caught_by):
    """Kernel ``bug`` fails its catching case, on (at least) the array the bug corrupts."""
    case_id, array = caught_by[bug]
    (case,) = run_check(kernel_class(bug), GOLDEN, case_ids=[case_id], diagnose=False).cases
    assert case.status == "failed", (bug, case.status, case.message)
    assert array in case.failing_arrays(), (bug, case.failing_arrays())
