"""pytest plugin: the golden cases as test items of a user's own test suite.

    pytest --refnorm-backend NAME [--refnorm-backend-option KEY=VALUE]... [--refnorm-golden DIR] [--refnorm-ops OP[,OP...]]
           [--refnorm-dtypes DT[,DT...]] [--refnorm-expect-failures FILE] [--refnorm-timeout S]
           [--refnorm-suite NAME]... [--refnorm-generate RECIPE]... [--refnorm-accept-partial]
    pytest --refnorm-backend torch-dist-cpu --refnorm-world-size N [--refnorm-generate 'PARALLEL SPLIT RECIPE']...

With ``--refnorm-world-size N`` the items are the distributed cases (refnorm/golden/distributed.py), judged
by N rank processes that share one process group for the whole session (refnorm/check/distributed.py).

With ``--refnorm-suite`` / ``--refnorm-generate`` the items are those generated cases (refnorm/golden/
generate.py) instead of the golden set, one per recipe, judged the same way.

NAME is anything ``refnorm check --backend`` accepts (a built-in, ``package.module:attr``, or a name in
the ``refnorm.backends`` entry-point group). One item per golden case, ``refnorm::<case id>``, marked
``refnorm`` (select with ``-m refnorm``, ``-k layer_norm``). Each item runs ``check_case``: a failed or
errored case fails with the check's own text (the arrays beyond their bound, their worst elements and
the ``refnorm check`` command that reproduces it); a partial case (an array unconstrained or unchecked,
nothing failed) fails too, saying which arrays were not verified and why, unless
``--refnorm-accept-partial`` is given (then it passes, and the report lists it); a skipped case skips
with the reason; an unavailable backend skips every item with its reason. A case listed in
``--refnorm-expect-failures`` xfails only when it fails exactly as its entry records (the failing
arrays, the error text, the diagnosis); a listed case that passes, or fails differently, fails the run,
as in ``refnorm check``.

Write ``--refnorm-golden=DIR`` with the ``=``: pytest picks its rootdir from the arguments that are not
options, and a separate ``DIR`` looks like one. Registered through the ``pytest11`` entry point, so installing refnorm makes the options available;
without ``--refnorm-backend`` it collects nothing and imports nothing but pytest.
"""
from __future__ import annotations

import shlex

import pytest


def pytest_addoption(parser):
    g = parser.getgroup("refnorm", "refnorm: judge a backend on the golden cases")
    g.addoption("--refnorm-backend", metavar="NAME",
                help="collect the golden cases as tests of this backend (as refnorm check --backend)")
    g.addoption("--refnorm-backend-option", action="append", metavar="KEY=VALUE",
                help="a keyword argument for the backend's factory or class (as refnorm check --backend-option)")
    g.addoption("--refnorm-golden", metavar="DIR", help="golden set (default: as refnorm check)")
    g.addoption("--refnorm-ops", action="append", metavar="OP[,OP...]", help="only these normalizers")
    g.addoption("--refnorm-dtypes", action="append", metavar="DT[,DT...]", help="only these dtypes")
    g.addoption("--refnorm-expect-failures", metavar="FILE", help="expected failures, each recording what fails (as refnorm check --expect-failures; "
                     "or a list's name, as refnorm check)")
    g.addoption("--refnorm-timeout", type=float, default=60.0, metavar="S", help="per-case limit (default 60)")
    g.addoption("--refnorm-suite", action="append", metavar="NAME",
                help="judge a suite of generated cases instead of the golden set (as refnorm check --suite)")
    g.addoption("--refnorm-generate", action="append", metavar="RECIPE",
                help="judge a generated case instead of the golden set (as refnorm check --generate)")
    g.addoption("--refnorm-world-size", type=int, metavar="N",
                help="judge a distributed backend on the distributed cases with N ranks (as refnorm check --world-size)")
    g.addoption("--refnorm-accept-partial", action="store_true",
                help="let a partial case (an array unconstrained or unchecked, nothing failed) pass")


def pytest_configure(config):
    config.addinivalue_line("markers", "refnorm: a golden case judged by refnorm (--refnorm-backend)")


def _split(values):
    return [v for item in values or () for v in item.split(",") if v] or None


class CaseFailure(Exception):
    """A golden case that failed or errored; the message is the check's report of it."""


class GoldenCases(pytest.Collector):
    """The golden set, judged on one backend (created only with --refnorm-backend)."""

    def collect(self):
        ops, dtypes = _split(self.config.getoption("refnorm_ops")), _split(self.config.getoption("refnorm_dtypes"))
        for name, op, dtype, (recipe, dcase) in self._entries():
            if (ops and op not in ops) or (dtypes and dtype not in dtypes):
                continue
            item = GoldenCase.from_parent(self, name=name)
            item.recipe, item.dcase = recipe, dcase
            item.add_marker(pytest.mark.refnorm)
            yield item

    def _entries(self) -> list:
        """(id, op, dtype, (recipe, distributed case)) of each case to judge: the distributed cases
        (--refnorm-world-size), the generated recipes (--refnorm-suite, --refnorm-generate), or else the
        golden set's cases."""
        if self.dcases is not None:
            return [(d.id, d.op, d.recipe.case.dtype, (None, d)) for d in self.dcases]
        if self.recipes is not None:
            return [(r.id, r.case.op, r.case.dtype, (r, None)) for r in self.recipes]
        return [(e["id"], e["case"]["op"], e["case"]["dtype"], (None, None)) for e in self.manifest["cases"]]


class GoldenCase(pytest.Item):
    """One golden case; ``runtest`` judges the backend on it (``refnorm.check.core.check_case``)."""

    def runtest(self):
        from refnorm.check import report as R
        from refnorm.check.core import check_case, expected_outcome
        from refnorm.golden.commands import load_case
        parent = self.parent
        if parent.unavailable:
            pytest.skip(f"backend {parent.backend_arg} is unavailable: {parent.unavailable}")
        recipe, dcase = getattr(self, "recipe", None), getattr(self, "dcase", None)
        if dcase is not None:
            if parent.dist_session is None:
                from refnorm.check.distributed import Session
                parent.dist_session = Session(parent.backend, self.config.getoption("refnorm_world_size"),
                                         timeout=self.config.getoption("refnorm_timeout"))
                self.config.add_cleanup(parent.dist_session.close)
            res = parent.dist_session.check(dcase)
        elif recipe is not None:
            from refnorm.check.core import too_big
            from refnorm.golden import generate
            big = too_big(recipe)
            if big:
                pytest.skip(big)
            case = generate.materialize(recipe)
        else:
            case = load_case(parent.golden, self.name, manifest=parent.manifest)
        if dcase is None:
            res = check_case(parent.backend, case, timeout=self.config.getoption("refnorm_timeout"))
        if self.name in parent.expected:
            expected_outcome(res, parent.expected[self.name])
        text = R.case_text(res, parent.backend_arg, self.config.getoption("refnorm_golden"))
        if res.status == "skipped":
            pytest.skip(res.message)
        if res.status == "xfail":
            pytest.xfail(text)
        if res.status in ("failed", "error"):
            raise CaseFailure(text)
        if res.status == "partial":
            if not self.config.getoption("refnorm_accept_partial"):
                raise CaseFailure(text + "\n  (partial: not every array was verified; --refnorm-accept-partial "
                                         "lets such a case pass)")
            self.add_report_section("call", "refnorm", text)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"refnorm {self.name}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Collect the golden cases and add them (tryfirst: before -k/-m deselection sees the items); the
    collect report goes through the ordinary hooks, so pytest counts and reports them as collected."""
    name = config.getoption("refnorm_backend")
    if not name:
        return
    from refnorm.check import get_backend
    from refnorm.check.core import read_expected_failures
    from refnorm.cli import default_golden_dir
    from refnorm.errors import RefnormError
    from refnorm.golden import store
    expect = config.getoption("refnorm_expect_failures")
    recipes = dcases = None
    world = config.getoption("refnorm_world_size")
    try:
        from refnorm.check.backends.plugin import parse_options
        opts = config.getoption("refnorm_backend_option") or []
        backend = get_backend(name, parse_options(opts))
        name = name + "".join(f" --backend-option {shlex.quote(o)}" for o in opts)
        if world is not None:
            from refnorm.check.distributed import check_backend, check_world_size
            from refnorm.golden import distributed as D
            check_world_size(world)
            check_backend(backend)
            dcases = D.cases(config.getoption("refnorm_generate") or ())
            D.check_world(dcases, world)
            golden, manifest, expected = None, {"cases": []}, {}
        elif config.getoption("refnorm_suite") or config.getoption("refnorm_generate"):
            from refnorm.golden import generate
            recipes = generate.recipes(config.getoption("refnorm_suite"), config.getoption("refnorm_generate"))
            golden, manifest = None, {"cases": []}
            expected = read_expected_failures(store.find_expected_failures(expect)) if expect else {}
            _check_expected(expected, generate.known_ids(recipes) | _golden_ids(config))
        else:
            golden = config.getoption("refnorm_golden") or default_golden_dir()
            manifest = store.read_manifest(golden)
            expected = read_expected_failures(store.find_expected_failures(expect)) if expect else {}
    except RefnormError as e:
        raise pytest.UsageError(f"refnorm: {e}") from None
    if recipes is None and dcases is None:
        _check_names(config, manifest, expected)
    col = GoldenCases.from_parent(session, name="refnorm", nodeid="refnorm")
    col.backend, col.backend_arg, col.golden, col.manifest, col.expected = backend, name, golden, manifest, expected
    col.recipes, col.dcases, col.dist_session = recipes, dcases, None
    col.unavailable = backend.available()
    rep = col.ihook.pytest_make_collect_report(collector=col)
    col.ihook.pytest_collectreport(report=rep)
    items.extend(x for x in rep.result if isinstance(x, pytest.Item))


def _golden_ids(config) -> set:
    """The golden set's case ids (none where there is no golden set)."""
    from refnorm.cli import default_golden_dir
    from refnorm.errors import RefnormError
    from refnorm.golden import store
    try:
        return {e["id"] for e in store.read_manifest(config.getoption("refnorm_golden") or default_golden_dir())["cases"]}
    except RefnormError:
        return set()


def _check_expected(expected, known):
    """Generated and suite cases may be listed as expected failures (as refnorm check's); an id that is in
    neither the golden set, a suite nor this run is a usage error."""
    bad = sorted(c for c in expected if c not in known)
    if bad:
        raise pytest.UsageError(f"refnorm: expected failures name case(s) not in the golden set, a suite or the "
                                f"generated cases: {', '.join(bad)}")


def _check_names(config, manifest, expected):
    """Unknown ops, dtypes or expected-failure ids are usage errors, never an empty (passing) selection."""
    known = {"op": {e["case"]["op"] for e in manifest["cases"]}, "dtype": {e["case"]["dtype"] for e in manifest["cases"]}}
    for what, opt in (("op", "refnorm_ops"), ("dtype", "refnorm_dtypes")):
        bad = sorted(set(_split(config.getoption(opt)) or ()) - known[what])
        if bad:
            raise pytest.UsageError(f"refnorm: --{opt.replace('_', '-')} {', '.join(bad)}: not in the golden set; "
                                    f"expected {', '.join(sorted(known[what]))}")
    from refnorm.golden.commands import SelectionError, select
    try:        # known ops and dtypes whose combination selects no case: a usage error as well
        select(manifest, ops=_split(config.getoption("refnorm_ops")), dtypes=_split(config.getoption("refnorm_dtypes")),
               flags={"ops": "--refnorm-ops", "dtypes": "--refnorm-dtypes"})
    except SelectionError as e:
        raise pytest.UsageError(f"refnorm: {e}") from None
    from refnorm.golden import generate
    _check_expected(expected, {e["id"] for e in manifest["cases"]} | generate.known_ids())


def pytest_report_collectionfinish(config, start_path, items):
    """A line after "collected N items": how many golden cases, for which backend, from which set."""
    name = config.getoption("refnorm_backend")
    if not name:
        return None
    n = sum(isinstance(i, GoldenCase) for i in items)
    golden = next((i.parent.golden for i in items if isinstance(i, GoldenCase)), "-")
    return f"refnorm: {n} golden case(s) selected for backend {name} (golden set {golden})"
