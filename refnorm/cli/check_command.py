"""``refnorm check``: the golden set, generated or distributed cases judged on a backend, in one layout
or every one, with expected failures applied; the compact or verbose report, the JSON, JUnit XML and
Markdown files, and the exit status (refnorm/cli/__init__.py's docstring)."""
from __future__ import annotations

import json
import os
import shlex
import sys

from ..errors import RefnormError
from ._common import (CLIError, _check_ops_dtypes, _check_report_dir, _check_writable, _write_atomically,
                      default_golden_dir)


def _progress(stream):
    tty = stream.isatty()
    last = [0.0]

    def show(done, total, case_id):
        import time
        now = time.monotonic()
        if done < total and now - last[0] < (0.1 if tty else 10.0):
            return
        last[0] = now
        width = 30
        fill = int(width * done / max(total, 1))
        line = f"[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {case_id}"
        if tty:
            stream.write("\r" + line[:100].ljust(100) + ("\n" if done == total else ""))
        else:
            stream.write(line + "\n")
        stream.flush()
    return show


def _run(args, backend, golden_dir, recipes, dist_cases, progress, layout=None):
    """The check itself: distributed cases, the golden set, or generated cases (in ``layout``)."""
    from .. import check
    if dist_cases is not None:
        from ..check.distributed import run_distributed
        return run_distributed(backend, dist_cases, world_size=args.world_size, timeout=args.timeout,
                               progress=progress, diagnose=not args.no_diagnosis, port=args.port, ops=args.ops,
                               dtypes=args.dtypes, name=f"{len(args.generate)} distributed case(s)" if args.generate
                               else "distributed cases")
    if recipes is None:
        return check.run_check(backend, golden_dir, ops=args.ops, dtypes=args.dtypes, case_ids=args.case,
                               timeout=args.timeout, progress=progress, diagnose=not args.no_diagnosis,
                               layout=layout or "contiguous")
    from ..check.core import run_generated
    return run_generated(backend, recipes, ops=args.ops, dtypes=args.dtypes, timeout=args.timeout,
                         progress=progress, diagnose=not args.no_diagnosis, layout=layout,
                         name=" + ".join([f"suite {n}" for n in args.suite or ()] + (
                             [f"{len(args.generate)} recipe(s)"] if args.generate else [])))


def _cmd_check(args):
    from .. import check
    from ..check import report as R
    _check_ops_dtypes(args)
    if args.timeout is not None and not args.timeout > 0:
        raise CLIError(f"--timeout {args.timeout!r}: expected a positive number of seconds")
    from ..golden import layouts
    if args.layout is not None and args.layout not in (*layouts.LAYOUTS, "all"):
        raise CLIError(f"--layout {args.layout!r}: expected one of: {', '.join(layouts.LAYOUTS)}, or all")
    sweep = list(layouts.LAYOUTS) if args.layout == "all" else [args.layout]
    dist_cases = _dist_cases(args)
    recipes = None if dist_cases is not None else _recipes(args)
    if recipes is not None and (args.case or args.golden):
        raise CLIError("--generate/--suite judge generated cases: --case and --golden apply to the golden set only")
    golden_dir = None
    if dist_cases is not None:
        pass
    elif recipes is None:
        golden_dir = args.golden or default_golden_dir()
        from ..golden import commands as golden_commands, store as golden_store
        # an unknown --case, a --case the other filters exclude, or filters that select nothing: exit 2
        golden_commands.select(golden_store.read_manifest(golden_dir), ops=args.ops, dtypes=args.dtypes,
                               case_ids=args.case, directory=args.golden)
    elif not [r for r in recipes if (not args.ops or r.case.op in args.ops)
              and (not args.dtypes or r.case.dtype in args.dtypes)]:
        raise CLIError("--ops/--dtypes select none of the generated cases")
    from ..check.backends import plugin
    options = plugin.parse_options(args.backend_option)
    backend = check.get_backend(args.backend, options)
    # the backend as the reproduce commands name it: with its options
    backend_arg = args.backend + "".join(f" --backend-option {shlex.quote(o)}" for o in args.backend_option or ())
    reason = backend.available()
    if reason:
        print(f"refnorm check: backend {args.backend} is unavailable: {reason}", file=sys.stderr)
        return 3
    from ..check.backends.dist import is_distributed
    if dist_cases is None and is_distributed(backend):
        raise CLIError(f"--backend {args.backend}: a distributed backend: give --world-size N (N >= 2 processes)")
    for flag, path in (("--json", args.json), ("--junit-xml", args.junit_xml)):
        if path:
            _check_writable(path, flag)
    if args.report:
        _check_report_dir(args.report)
    progress = None if args.no_progress else _progress(sys.stderr)
    expected = None
    if args.expect_failures:
        from ..check.core import read_expected_failures
        from ..golden.store import find_expected_failures
        expected_path = find_expected_failures(args.expect_failures)
        expected = read_expected_failures(expected_path, layout=sweep[0] or "contiguous")   # bad lines: exit 2 now
    isolated = None
    if args.isolate:
        if dist_cases is not None:
            raise CLIError("--isolate with --world-size: the distributed runner already runs every rank in its own "
                           "process")
        from ..check.isolate import Isolated
        backend = isolated = Isolated(backend, args.timeout)
    reports = []
    try:
        for lay in sweep:                       # one layout, or every one (--layout all)
            report = _run(args, backend, golden_dir, recipes, dist_cases, progress, lay)
            if expected is not None:
                from ..check.core import apply_expected_failures, read_expected_failures
                apply_expected_failures(report, read_expected_failures(expected_path, layout=lay or "contiguous"),
                                        _listable_ids(report, golden_dir), diagnosed=not args.no_diagnosis)
            reports.append(report)
    finally:
        if isolated is not None:
            isolated.close()
    report = reports[0] if len(reports) == 1 else check.merge_reports(reports, "golden set in every layout"
                                                                      if recipes is None else "every layout")
    if args.verbose:
        _print_details(report, backend_arg, args.golden)
    else:
        print(R.compact(report, backend_arg, args.golden))
    print(R.platform_line(report))
    print(R.summary_line(report, accept_partial=args.accept_partial))
    if args.json:
        data = json.dumps(report.to_json(), indent=1).encode()
        _write_atomically(args.json, data)
        print(f"wrote {args.json}")
    if args.junit_xml:
        from ..check.junit import junit_xml
        _write_atomically(args.junit_xml, junit_xml(report, backend_arg, args.golden, args.accept_partial))
        print(f"wrote {args.junit_xml}")
    if args.report:
        from ..check.markdown import SUMMARY, report_files
        files, note = report_files(report, backend_arg, args.golden, args.accept_partial)
        os.makedirs(args.report, exist_ok=True)
        for name, data in files.items():
            _write_atomically(os.path.join(args.report, name), data)
        if note:
            print(f"refnorm check: --report: {note}; wrote only {os.path.join(args.report, SUMMARY)}", file=sys.stderr)
        print(f"wrote {os.path.join(args.report, SUMMARY)}" + (f" and {len(files) - 1} plot(s)" if not note else ""))
    return exit_status(report, args.accept_partial)


def _listable_ids(report, golden_dir) -> set:
    """The case ids an expected-failures file may name: the golden set's, every named suite's, and this run's
    (its --generate recipes, in any --layout). A listed id in none of them is an error (a typo or a stale
    entry), as a golden id not in the golden set always was; one that is not in this run is left alone."""
    from ..golden import generate, store
    if golden_dir is None:                  # generated cases: the golden set, where there is one, still counts
        try:
            golden_dir = default_golden_dir()
        except RefnormError:
            pass
    ids = {e["id"] for e in store.read_manifest(golden_dir)["cases"]} if golden_dir else set()
    return ids | generate.known_ids() | {c.id for c in report.cases}


def _print_details(report, backend_arg, golden_arg):
    """--verbose: every section in full (the compact default is report.compact)."""
    from ..check import report as R
    print(R.table(report))
    for text in (R.skips(report), R.warnings(report), R.weak(report), R.conversions(report), R.partials(report),
                 R.failures(report, backend_arg, golden_arg), R.headroom_table(report)):
        if text:
            print(text)


def exit_status(report, accept_partial=False) -> int:
    """0: every judged case passed (all its arrays verified); 1: a case failed or errored, or nothing
    was judged; 4: nothing failed but some case is partial (an array unconstrained or unchecked),
    0 instead with --accept-partial."""
    v = report.verdict
    return 0 if v == "ok" or (v == "partial" and accept_partial) else (4 if v == "partial" else 1)


def _recipes(args):
    """The generated cases of --suite and --generate (None when neither is given); a bad recipe or
    suite name is a usage error naming it and the choices."""
    if not args.suite and not args.generate:
        return None
    from ..golden import generate
    try:
        return generate.recipes(args.suite, args.generate)
    except generate.RecipeError as e:
        raise CLIError(str(e)) from None


def _dist_cases(args):
    """The distributed cases of --world-size (every one of refnorm.golden.distributed.CASES, or the
    --generate lines in its format), None without --world-size; bad input is a usage error (exit 2)
    before any process starts."""
    if args.world_size is None:
        if args.port is not None:
            raise CLIError(f"--port {args.port}: only with --world-size N (the distributed runner's group)")
        return None
    from ..check.distributed import check_world_size
    from ..golden import distributed as D
    check_world_size(args.world_size)
    for flag, v in (("--suite", args.suite), ("--case", args.case), ("--golden", args.golden),
                    ("--layout", args.layout), ("--expect-failures", args.expect_failures)):
        if v:
            raise CLIError(f"{flag} does not apply with --world-size: distributed cases are the lines of "
                           "refnorm/golden/distributed.py (or --generate 'PARALLEL SPLIT RECIPE')")
    if args.port is not None and not 0 < args.port < 65536:
        raise CLIError(f"--port {args.port}: expected a TCP port number in 1..65535")
    try:
        cases = D.cases(args.generate or ())
    except RefnormError as e:
        raise CLIError(str(e)) from None
    chosen = [d for d in cases if (not args.ops or d.op in args.ops) and (not args.dtypes or d.recipe.case.dtype in args.dtypes)]
    if not chosen:
        raise CLIError("--ops/--dtypes select none of the distributed cases")
    D.check_world(chosen, args.world_size)
    return cases
