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

The package: this module parses the arguments and runs list, eval, derive and golden; check_command.py
runs ``refnorm check``; _common.py holds what both use (the usage error, argument parsing, atomic writes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from .. import registry
from ..errors import RefnormError
from ._common import (CLIError, _check_ops_dtypes, _load_npy, _pairs, _shape, _write_atomically,  # noqa: F401
                      default_golden_dir)
from .check_command import _cmd_check, exit_status  # noqa: F401 (exit_status: re-exported)

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
    from ..check.precision import DTYPES, round_to
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
    from .. import derivations
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


def _cmd_golden(args):
    from .. import golden
    from ..golden import commands
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
    from ..golden import commands, store
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

