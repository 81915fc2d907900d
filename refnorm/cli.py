"""Layer 5: the command line, a thin face over refnorm.evaluate.

    refnorm list
    refnorm eval NAME [--input KEY=FILE.npy | --random KEY=D0,D1,...[:DTYPE]]... [--config JSON]
                      [--grad KEY=FILE.npy | --grad KEY=random]... [--state KEY=FILE.npy]...
                      [--eval] [--seed N] [--out FILE.npz]
    refnorm derive NAME [--format text|markdown|latex] [--prove]
    refnorm derive --all (--write | --check) [--dir DIR]
    refnorm golden build [DIR]
    refnorm check --backend NAME|package.module:attr [--backend-option KEY=VALUE]... [--ops OP...] [--dtypes DT...] [--case ID]...
                  [--golden DIR] [--json FILE] [--junit-xml FILE] [--report DIR] [--timeout S]
                  [--no-progress] [--expect-failures FILE]
    refnorm check --backend torch-dist-cpu --world-size N [--port P] [--generate 'PARALLEL SPLIT RECIPE']...
    refnorm golden verify [DIR] [--exact] [--op NAME]...
    refnorm golden list [DIR] [--ops OP...] [--dtypes DT...] [--regimes R...] [--match GLOB] [--long]

Exit status: 0 on success, 1 when a check fails (check, derive --check, golden verify), 2 for bad
input or bad golden data, 3 when the backend is unavailable (check), 4 when a check found no failure
but some case is partial, i.e. an array was unconstrained or unchecked (0 with --accept-partial) (the
message names the value and what was expected).
``--out`` writes every array to one .npz: the inputs, initial state and cotangents it was given or drew
(keys ``input.x``, ``init.state.running_mean``, ``cotangent.y``) and the outputs, grads and state after
the call (``output.y``, ``grad.x``, ``state.running_mean``), through a temporary file and a rename, so
an interrupted or failed run leaves no half-written file.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile

import numpy as np

from . import registry
from .errors import RefnormError


class CLIError(RefnormError):
    pass


def _pairs(items, what):
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise CLIError(f"{what} {item!r}: expected KEY=VALUE")
        if key in out:
            raise CLIError(f"{what} {key!r} given twice")
        out[key] = value
    return out


def _load_npy(path, what):
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CLIError(f"{what}: file {path!r} does not exist") from None
    except (ValueError, OSError) as e:
        raise CLIError(f"{what}: cannot read {path!r} as a .npy array without pickles: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise CLIError(f"{what}: {path!r} is an archive, expected a single .npy array")
    return arr


def _shape(text, what):
    try:
        shape = tuple(int(s) for s in text.split(",") if s.strip() != "")
    except ValueError:
        raise CLIError(f"{what}: shape {text!r} must be comma-separated integers, e.g. 4,8") from None
    if any(s < 0 for s in shape):
        raise CLIError(f"{what}: shape {text!r} has a negative size")
    return shape


def _cmd_list(args):
    for name in registry.names():
        spec = registry.get(name)
        print(f"{name:24s} {spec.summary}")
    return 0


def _cmd_eval(args):
    rng = np.random.default_rng(args.seed)
    inputs = {k: _load_npy(v, f"--input {k}") for k, v in _pairs(args.input, "--input").items()}
    for k, v in _pairs(args.random, "--random").items():
        if k in inputs:
            raise CLIError(f"input {k!r} given by both --input and --random")
        inputs[k] = _random_input(rng, v, f"--random {k}")
    try:
        config = json.loads(args.config) if args.config else {}
    except json.JSONDecodeError as e:
        raise CLIError(f"--config {args.config!r} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise CLIError(f"--config must be a JSON object, got {args.config!r}")
    state = {k: _load_npy(v, f"--state {k}") for k, v in _pairs(args.state, "--state").items()}
    grads = _pairs(args.grad, "--grad")
    grad_outputs = None
    if grads:
        probe = registry.evaluate(args.name, inputs, config=config, state=state, training=not args.eval)
        grad_outputs = {}
        for k, v in grads.items():
            if k not in probe.outputs:
                raise CLIError(f"--grad {k}: {args.name} has no output {k!r}; outputs: {', '.join(probe.outputs)}")
            grad_outputs[k] = (rng.standard_normal(probe.outputs[k].shape) if v == "random"
                               else _load_npy(v, f"--grad {k}"))
    res = registry.evaluate(args.name, inputs, config=config, grad_outputs=grad_outputs, state=state,
                            training=not args.eval)
    np.set_printoptions(precision=6, threshold=20, edgeitems=3)
    for group, arrays in (("output", res.outputs), ("grad", res.grads), ("state", res.state)):
        for k, v in arrays.items():
            print(f"{group}.{k} shape={tuple(np.shape(v))}\n{np.asarray(v)}")
    if args.out:
        groups = (("input", inputs), ("init.state", state), ("cotangent", grad_outputs or {}),
                  ("output", res.outputs), ("grad", res.grads), ("state", res.state))
        _save_npz_atomically(args.out, {f"{g}.{k}": _storable(v) for g, d in groups for k, v in d.items()})
        print(f"wrote {args.out}")
    return 0


def _random_input(rng, text, what):
    """``D0,D1,...[:DTYPE]``: a standard-normal draw of that shape, rounded to nearest in DTYPE
    (default float64: the draw itself)."""
    from .check.precision import DTYPES, round_to
    shape_text, sep, dtype = text.partition(":")
    if sep and dtype not in DTYPES:
        raise CLIError(f"{what}: dtype {dtype!r} is not one of {', '.join(DTYPES)} (e.g. x=4,8:float16)")
    x = rng.standard_normal(_shape(shape_text, what))
    return round_to(x, dtype) if sep and dtype != "float64" else x


def _storable(v):
    """An array .npz can hold: bfloat16 (which .npz stores as raw bytes) widened to float32, exactly."""
    a = np.asarray(v)
    return a.astype(np.float32) if a.dtype.kind == "V" and a.dtype.itemsize == 2 else a


def _save_npz_atomically(path, arrays):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CLIError(f"--out {path!r}: directory {directory!r} does not exist")
    _write_atomically(path, lambda f: np.savez(f, **arrays), suffix=".npz")


def _cmd_derive(args):
    """Print a derivation (text by default); --all --write regenerates derivations/*.md, --check compares."""
    from . import derivations
    if args.all == (args.name is not None):
        raise CLIError("derive: give one NAME or --all")
    if args.name is not None:
        try:
            derivations.resolve(args.name)      # a family, or a normalizer derived in one (instance_norm)
        except KeyError as e:
            raise CLIError(e.args[0]) from None
    if args.write or args.check:
        if not args.all:
            raise CLIError("derive: --write and --check regenerate or compare every file: use --all")
        # the checkout's derivations/, found from the package: the same files from any current directory
        directory = args.dir if args.dir is not None else derivations.default_directory()
        if directory is None:
            raise CLIError(f"derive: no derivations/ directory at {derivations.expected_directory()} (refnorm "
                           "is not run from a source checkout; an installed wheel has none): pass --dir DIR")
        if args.check:
            bad = derivations.stale(directory)
            for path in bad:
                print(f"out of date: {path} (regenerate: refnorm derive --all --write --dir {directory})")
            return 1 if bad else 0
        for path in derivations.write_all(directory):
            print(f"wrote {path}")
        return 0
    status = 0
    for name in derivations.names() if args.all else [args.name]:
        print(derivations.render(name, args.format))
        if args.prove:
            mod = derivations.get(name)
            try:
                print(f"{name}: {len(mod.prove())} symbolic claims hold; closed forms match refnorm.evaluate "
                      f"to {mod.check_numeric():.1e} relative")
            except (derivations.ProofError, ImportError) as e:
                print(f"{name}: FAILED: {e}", file=sys.stderr)
                status = 1
    return status


def default_golden_dir() -> str:
    """The golden set to use when none is named: $REFNORM_GOLDEN, else ./golden, else the checkout's
    golden/, else the copy packaged in the wheel (refnorm.golden.store.find_golden)."""
    from .golden import store
    return store.find_golden()


def _cmd_golden(args):
    from . import golden
    from .golden import commands
    directory = args.dir
    if args.action == "build":
        directory = directory or "golden"
        print(commands.build(directory, log=None if args.quiet else print).summary())
        return 0
    directory = directory or default_golden_dir()
    for op in args.op or ():
        if op not in registry.names():
            raise CLIError(f"--op {op!r}: unknown normalizer; expected one of: {', '.join(registry.names())}")
    if args.action == "list":
        return _golden_list(args, directory)
    if args.ops or args.dtypes or args.regimes or args.match or args.long:
        raise CLIError("--ops, --dtypes, --regimes, --match and --long apply to list only (verify: --op NAME)")
    if args.exact and args.action != "verify":
        raise CLIError("--exact applies to verify only")
    report = golden.verify(directory, ops=args.op, exact=args.exact, engine=args.engine,
                           log=None if args.quiet else print)
    print(report.summary())
    return 0 if report.ok else 1


def _golden_list(args, directory):
    """``refnorm golden list``: the ids of the cases the filters select, one a line (--long: with dtype,
    regime, input shapes and steps)."""
    from .golden import commands, store
    ops = (args.op or []) + (args.ops or []) or None
    _check_ops_dtypes(args)
    entries = commands.select(store.read_manifest(directory), ops=ops, dtypes=args.dtypes, regimes=args.regimes,
                              match=args.match, directory=args.dir)
    lines = []
    for e in entries:
        row = e["case"]
        shapes = " ".join(f"{k}={'x'.join(map(str, v)) or '()'}" for k, v in (row.get("inputs") or {}).items())
        lines.append(f"{e['id']:56s} {row.get('dtype', '?'):8s} {row.get('regime', '?'):14s} {shapes}  "
                     f"steps={','.join(row.get('steps') or ())}" if args.long else e["id"])
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:                      # refnorm golden list | head: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


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


def _check_ops_dtypes(args):
    """--ops and --dtypes name known normalizers and dtypes, or it is a usage error naming the choices."""
    from .check.precision import DTYPES
    for op in args.ops or ():
        if op not in registry.names():
            raise CLIError(f"--ops {op!r}: unknown normalizer; expected one of: {', '.join(registry.names())}")
    for dt in args.dtypes or ():
        if dt not in DTYPES:
            raise CLIError(f"--dtypes {dt!r}: expected one of: {', '.join(DTYPES)}")


def _run(args, backend, golden_dir, recipes, dist_cases, progress, layout=None):
    """The check itself: distributed cases, the golden set, or generated cases (in ``layout``)."""
    from . import check
    if dist_cases is not None:
        from .check.distributed import run_distributed
        return run_distributed(backend, dist_cases, world_size=args.world_size, timeout=args.timeout,
                               progress=progress, diagnose=not args.no_diagnosis, port=args.port, ops=args.ops,
                               dtypes=args.dtypes, name=f"{len(args.generate)} distributed case(s)" if args.generate
                               else "distributed cases")
    if recipes is None:
        return check.run_check(backend, golden_dir, ops=args.ops, dtypes=args.dtypes, case_ids=args.case,
                               timeout=args.timeout, progress=progress, diagnose=not args.no_diagnosis,
                               layout=layout or "contiguous")
    from .check.core import run_generated
    return run_generated(backend, recipes, ops=args.ops, dtypes=args.dtypes, timeout=args.timeout,
                         progress=progress, diagnose=not args.no_diagnosis, layout=layout,
                         name=" + ".join([f"suite {n}" for n in args.suite or ()] + (
                             [f"{len(args.generate)} recipe(s)"] if args.generate else [])))


def _cmd_check(args):
    from . import check
    from .check import report as R
    _check_ops_dtypes(args)
    if args.timeout is not None and not args.timeout > 0:
        raise CLIError(f"--timeout {args.timeout!r}: expected a positive number of seconds")
    from .golden import layouts
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
        from .golden import commands as golden_commands, store as golden_store
        # an unknown --case, a --case the other filters exclude, or filters that select nothing: exit 2
        golden_commands.select(golden_store.read_manifest(golden_dir), ops=args.ops, dtypes=args.dtypes,
                               case_ids=args.case, directory=args.golden)
    elif not [r for r in recipes if (not args.ops or r.case.op in args.ops)
              and (not args.dtypes or r.case.dtype in args.dtypes)]:
        raise CLIError("--ops/--dtypes select none of the generated cases")
    from .check.backends import plugin
    options = plugin.parse_options(args.backend_option)
    backend = check.get_backend(args.backend, options)
    # the backend as the reproduce commands name it: with its options
    backend_arg = args.backend + "".join(f" --backend-option {shlex.quote(o)}" for o in args.backend_option or ())
    reason = backend.available()
    if reason:
        print(f"refnorm check: backend {args.backend} is unavailable: {reason}", file=sys.stderr)
        return 3
    from .check.backends.dist import is_distributed
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
        from .check.core import read_expected_failures
        from .golden.store import find_expected_failures
        expected_path = find_expected_failures(args.expect_failures)
        expected = read_expected_failures(expected_path, layout=sweep[0] or "contiguous")   # bad lines: exit 2 now
    isolated = None
    if args.isolate:
        if dist_cases is not None:
            raise CLIError("--isolate with --world-size: the distributed runner already runs every rank in its own "
                           "process")
        from .check.isolate import Isolated
        backend = isolated = Isolated(backend, args.timeout)
    reports = []
    try:
        for lay in sweep:                       # one layout, or every one (--layout all)
            report = _run(args, backend, golden_dir, recipes, dist_cases, progress, lay)
            if expected is not None:
                from .check.core import apply_expected_failures, read_expected_failures
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
        from .check.junit import junit_xml
        _write_atomically(args.junit_xml, junit_xml(report, backend_arg, args.golden, args.accept_partial))
        print(f"wrote {args.junit_xml}")
    if args.report:
        from .check.markdown import SUMMARY, report_files
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
    from .golden import generate, store
    if golden_dir is None:                  # generated cases: the golden set, where there is one, still counts
        try:
            golden_dir = default_golden_dir()
        except RefnormError:
            pass
    ids = {e["id"] for e in store.read_manifest(golden_dir)["cases"]} if golden_dir else set()
    return ids | generate.known_ids() | {c.id for c in report.cases}


def _print_details(report, backend_arg, golden_arg):
    """--verbose: every section in full (the compact default is report.compact)."""
    from .check import report as R
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
    from .golden import generate
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
    from .check.distributed import check_world_size
    from .golden import distributed as D
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


def _check_writable(path, flag="--json"):
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise CLIError(f"{flag} {path!r}: directory {d!r} does not exist")
    if os.path.isdir(path):
        raise CLIError(f"{flag} {path!r} is a directory, expected a file name")


def _check_report_dir(path):
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"--report {path!r} is a file, expected a directory (created if missing)")
    if not os.path.isdir(parent):
        raise CLIError(f"--report {path!r}: directory {parent!r} does not exist")


def _write_atomically(path, data, suffix=".tmp"):
    """Write ``data`` (bytes, or a function writing to a binary file) to ``path`` through a temporary
    file in the same directory and a rename: an interrupted or failed write leaves no partial file.
    The file gets the mode a plain open() would give it (0666 & ~umask), not mkstemp's 0600."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".refnorm-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            if callable(data):
                data(f)
            else:
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def build_parser():
    p = argparse.ArgumentParser(prog="refnorm", description="Float64 ground truth for normalization layers.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the normalizers").set_defaults(func=_cmd_list)
    e = sub.add_parser("eval", help="evaluate one normalizer (forward, and backward with --grad)")
    e.add_argument("name", help="normalizer name (see `refnorm list`)")
    e.add_argument("--input", action="append", metavar="KEY=FILE.npy", help="an input from a .npy file")
    e.add_argument("--random", action="append", metavar="KEY=SHAPE[:DTYPE]",
                   help="a standard-normal input, e.g. x=4,8; rounded to DTYPE with x=4,8:float16 "
                        "(float64 default, float32, float16, bfloat16)")
    e.add_argument("--config", metavar="JSON", help='options as a JSON object, e.g. \'{"eps": 1e-5}\'')
    e.add_argument("--grad", action="append", metavar="KEY=FILE.npy|random", help="a cotangent for output KEY")
    e.add_argument("--state", action="append", metavar="KEY=FILE.npy", help="a state entry (running stats)")
    e.add_argument("--eval", action="store_true", help="eval mode (running statistics); default: training")
    e.add_argument("--seed", type=int, default=0, help="seed for --random and --grad KEY=random")
    e.add_argument("--out", metavar="FILE.npz",
                   help="also write every array to FILE.npz (atomically): input.K, init.state.K, cotangent.K, "
                        "output.K, grad.K, state.K (bfloat16 inputs as float32, exactly)")
    e.set_defaults(func=_cmd_eval)
    d = sub.add_parser("derive", help="print a backward-pass derivation; regenerate derivations/*.md")
    d.add_argument("name", nargs="?", help="family: batch_norm, layer_norm, rms_norm, group_norm, ... (or a "
                   "normalizer derived in one: instance_norm)")
    d.add_argument("--format", choices=("text", "markdown", "latex"), default="text", help="default: text")
    d.add_argument("--all", action="store_true", help="every family")
    d.add_argument("--write", action="store_true", help="with --all: write DIR/<name>.md and DIR/README.md")
    d.add_argument("--check", action="store_true", help="with --all: exit 1 if a file in DIR is out of date")
    d.add_argument("--dir", help="directory for --write/--check (default: the checkout's derivations/, "
                   "wherever the command runs)")
    d.add_argument("--prove", action="store_true", help="also run the symbolic proofs and numeric checks")
    d.set_defaults(func=_cmd_derive)
    g = sub.add_parser("golden", help="build, verify or list the golden data set",
                       description="build: regenerate the set from the case table; verify: check every hash "
                                   "and recompute every case; list: print the case ids (for check --case), "
                                   "e.g. refnorm golden list --ops layer_norm --dtypes float16 --long")
    g.add_argument("action", choices=("build", "verify", "list"))
    g.add_argument("dir", nargs="?", help="the set's directory (default: build: ./golden; else as "
                                          "check --golden)")
    g.add_argument("--exact", action="store_true", help="verify: demand bit-for-bit expected values")
    g.add_argument("--engine", choices=("fast", "spec"), default="fast",
                   help="verify: recompute with the fast path (default) or the plain specification (refnorm/specs/)")
    g.add_argument("--op", action="append", metavar="NAME", help="verify: only this normalizer (repeatable)")
    g.add_argument("--quiet", action="store_true", help="print only the summary")
    g.add_argument("--ops", nargs="+", metavar="OP", help="list: only these normalizers (give DIR before it)")
    g.add_argument("--dtypes", nargs="+", metavar="DT", help="list: only these dtypes (float64 float32 float16 bfloat16)")
    g.add_argument("--regimes", nargs="+", metavar="R", help="list: only these regimes (normal, mean1e3, const, ...)")
    g.add_argument("--match", metavar="GLOB", help="list: only ids matching this glob, e.g. 'layer_norm/*_f16_*'")
    g.add_argument("--long", action="store_true", help="list: also dtype, regime, input shapes and steps")
    g.set_defaults(func=_cmd_golden)
    c = sub.add_parser("check", help="judge a backend on the golden cases within derived tolerances")
    c.add_argument("--backend", required=True,
                   help="numpy, torch-cpu, torch-cuda, ...; a user's kernel as package.module:attr (a backend "
                        "object, class or factory) or a name in the 'refnorm.backends' entry-point group")
    c.add_argument("--backend-option", action="append", metavar="KEY=VALUE",
                   help="a keyword argument for the backend's factory or class (repeatable; VALUE is read as "
                        "JSON when it parses, else as a string), e.g. --backend torch-cpu --backend-option "
                        "param_dtype=case, or --backend mypkg.kernels:make --backend-option block=128")
    c.add_argument("--ops", nargs="+", metavar="OP", help="only these normalizers")
    c.add_argument("--dtypes", nargs="+", metavar="DT", help="only these dtypes (float64 float32 float16 bfloat16)")
    c.add_argument("--case", action="append", metavar="ID", help="only this golden case (repeatable)")
    c.add_argument("--golden", metavar="DIR", help="golden set (default: $REFNORM_GOLDEN, ./golden, the "
                                                   "checkout's, the packaged copy)")
    c.add_argument("--json", metavar="FILE", help="write the machine-readable report to FILE (atomically)")
    c.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report (one test case per golden case)")
    c.add_argument("--report", metavar="DIR", help="write DIR/summary.md and PNG plots of the errors per op "
                                                   "(plots need matplotlib: pip install 'refnorm[report]')")
    c.add_argument("--timeout", type=float, default=60.0, help="per-case time limit in seconds (default 60)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    c.add_argument("-v", "--verbose", action="store_true",
                   help="print every detail: each partial, failed and expected-failure case with its worst elements "
                        "and reproduce command, every skip reason, warning and note, and the HEADROOM table (default: "
                        "the table, skips grouped by reason, one line per failure, one line per kind of note)")
    c.add_argument("--generate", action="append", metavar="RECIPE",
                   help="judge a generated case instead of the golden set, e.g. 'layer_norm shape=16384x5137 "
                        "dtype=bfloat16 regime=mean1e3 layout=channels_last' (repeatable; refnorm/golden/generate.py)")
    c.add_argument("--suite", action="append", metavar="NAME",
                   help="judge a named suite of generated cases: production, boundaries, overflow, limits "
                        "(repeatable; refnorm/golden/suites.py says why each shape is there)")
    c.add_argument("--layout", metavar="LAYOUT",
                   help="hand every case's activations and cotangents to the backend in this memory layout: "
                        "contiguous, channels_last, transposed, strided, offset; or all: every case in each of them, "
                        "one report (known-failure entries scoped with layout= apply to their layouts)")
    c.add_argument("--world-size", type=int, metavar="N",
                   help="judge a distributed backend (torch-dist-cpu, ...) on the distributed cases with N rank "
                        "processes on torch.distributed (gloo on CPU): one process group for the whole check")
    c.add_argument("--port", type=int, metavar="P", help="with --world-size: the group's TCP port on 127.0.0.1 "
                                                         "(default: a free one)")
    c.add_argument("--accept-partial", action="store_true",
                   help="exit 0 when nothing failed even if some case is partial (an array unconstrained or "
                        "unchecked); the default exits 4 then, and every report still counts them as partial")
    c.add_argument("--isolate", action="store_true",
                   help="run the backend in its own process: a crash (segfault, abort, out of memory) or a hang "
                        "past --timeout is the error of that case, and the remaining cases still run")
    c.add_argument("--no-diagnosis", action="store_true",
                   help="do not diagnose failed cases (naming the known pitfall a failing backend matches)")
    c.add_argument("--expect-failures", metavar="FILE",
                   help="'CASE-ID reason' lines: known defects of the backend, reported as expected failures "
                        "(golden, suite and --generate case ids); "
                        "a listed case that passes fails the check; a bare name (torch-cpu, jax, ...) is "
                        "known_failures/NAME.txt of the checkout, else of the wheel")
    c.set_defaults(func=_cmd_check)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RefnormError as e:
        print(f"refnorm: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
