"""The golden-set commands: ``build``, ``verify``, and loading cases for a checker.

    build(directory, *, cases=None, log=None) -> BuildReport
    verify(directory, *, cases=None, exact=False, log=None) -> VerifyReport
    load_case(directory, case_id, *, manifest=None) -> GoldenCase
    iter_cases(directory, *, ops=None, dtypes=None) -> iterator of GoldenCase
    select(manifest, *, ops=None, dtypes=None, regimes=None, match=None, case_ids=None) -> manifest entries

``refnorm golden build|verify`` call the first two (the CLI prints ``report.summary()`` and exits 1
when ``not report.ok``).

What verify checks, per case (every problem is reported; ``report.ok`` is False if there is any):
1. the manifest parses and validates; every file's size and sha256 and every array's shape, dtype
   and sha256 match it (``store``); no unlisted files or symlinks in the directory;
2. the manifest's row equals the case table's row (a changed table needs a rebuild), and the set
   of cases equals the table's;
3. the stored inputs, cotangents and initial state equal a fresh draw from the table, bit for bit
   (the generators are platform-independent: ``build``), and bfloat16 values are bfloat16 numbers;
4. every expected output, gradient and state is recomputed with refnorm.evaluate from the STORED
   inputs and compared with the stored value.

Tolerance of step 4 (``exact=False``, the default). Every normalizer's tests hold the float64
reference to within 1e-13 * (1 + cond) of a 50-digit mpmath oracle, relative to the array's largest
magnitude (cond = |mean|/std of the worst slice, 0 where no mean is removed). Two float64
evaluations of the reference (say on two machines whose NumPy sums in a different order) are each
within that bound of the truth, hence within twice it of each other:

    |recomputed - stored| <= 2e-13 * (1 + cond) * max(|stored|, |recomputed|)     (per array)

NaN and infinities must sit at the same places with the same values; integer state must be equal.
This is far below anything a backend is judged by (float32 rounding is 6e-8), so a pass means the
expected values are the reference's, and any real change to the reference or the file (one wrong
element) fails. ``exact=True`` demands bit-for-bit equality instead: on the machine and NumPy that
built the set, recomputation is deterministic and gives identical bits. The report counts how many
arrays were bit-identical and the worst difference as a fraction of the tolerance.
"""
from __future__ import annotations

import difflib
import fnmatch
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np

from . import build as B
from . import store
from .cases import CASES, Case
from ..errors import RefnormError
from .store import GoldenError

VERIFY_RTOL = 2e-13


# --------------------------------------------------------------------------------------- build
@dataclass
class BuildReport:
    directory: str
    cases: int
    bytes: int
    seconds: float

    def summary(self) -> str:
        return (f"golden: built {self.cases} cases, {self.bytes / 2**20:.1f} MiB, in {self.seconds:.1f} s "
                f"-> {self.directory}")


def build(directory, *, cases: Iterable[Case] | None = None, log: Callable[[str], None] | None = None
          ) -> BuildReport:
    """Regenerate the golden set at ``directory`` from the case table, atomically.

    cases: the rows to build (default: every row of ``refnorm.golden.cases.CASES``). The whole
           directory is replaced by exactly these cases.
    log:   called with one line per case written (e.g. ``print``).
    On any error (or interruption) before the final swap the previous set is left intact.
    """
    t0 = time.perf_counter()
    rows = list(CASES if cases is None else cases)

    def items():
        for case in rows:
            arrays, fields = B.materialize(case)
            yield case.id, arrays, fields["value_dtypes"], fields["meta"]

    res = store.write_set(directory, items(), log=log)
    return BuildReport(str(directory), res["cases"], res["bytes"], time.perf_counter() - t0)


# -------------------------------------------------------------------------------------- verify
@dataclass
class VerifyReport:
    directory: str
    exact: bool
    cases: int = 0
    arrays: int = 0
    bit_identical: int = 0
    worst: float = 0.0            # max |recomputed - stored| / tolerance over the expected arrays
    worst_where: str = ""
    failures: list[str] = field(default_factory=list)
    generator: Mapping = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and self.cases > 0

    def summary(self) -> str:
        mode = "bit for bit" if self.exact else f"within {VERIFY_RTOL:g} * (1 + cond) of each array's scale"
        where = f" at {self.worst_where}" if self.worst_where else ""
        lines = [f"golden: {'OK' if self.ok else 'FAILED'}: {self.cases} cases, {self.arrays} arrays verified "
                 f"in {self.seconds:.1f} s ({mode}); {self.bit_identical} of the recomputed arrays bit-identical, "
                 f"worst difference {self.worst:.2g} of the tolerance{where}",
                 f"golden: built by {', '.join(f'{k} {v}' for k, v in self.generator.items())}"]
        if self.cases == 0 and not self.failures:
            lines.append("golden: FAILED: no cases verified")
        lines += [f"golden: FAIL {f}" for f in self.failures]
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise GoldenError(self.summary())


def _compare(name: str, got: np.ndarray, want: np.ndarray, cond: float, exact: bool):
    """(problem or None, ratio, bit_identical) for a recomputed array against the stored one."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{name}: recomputed {got.dtype}{got.shape}, stored {want.dtype}{want.shape}", 0.0, False
    if got.tobytes() == want.tobytes():
        return None, 0.0, True
    if want.dtype.kind != "f":
        return f"{name}: recomputed {got.tolist()} != stored {want.tolist()}", float("inf"), False
    fin_g, fin_w = np.isfinite(got), np.isfinite(want)
    if not (np.array_equal(fin_g, fin_w) and np.array_equal(got[~fin_w], want[~fin_w], equal_nan=True)):
        return f"{name}: NaN/Inf differ between the recomputed and the stored values", float("inf"), False
    g, w = got[fin_w], want[fin_w]
    diff = float(np.max(np.abs(g - w)))
    i = np.unravel_index(int(np.argmax(np.where(fin_w, np.abs(np.nan_to_num(got - want)), -1))), want.shape)
    if exact:
        return f"{name}: not bit-identical: max |difference| {diff:.3g} at {tuple(map(int, i))}", float("inf"), False
    scale = max(float(np.max(np.abs(w))), float(np.max(np.abs(g))))
    tol = VERIFY_RTOL * (1.0 + cond) * scale
    ratio = diff / tol if tol > 0 else float("inf")
    if ratio > 1:
        return (f"{name}: recomputed differs from stored by {diff:.3g} at {tuple(map(int, i))} "
                f"(stored {float(want[i])!r}, recomputed {float(got[i])!r}); tolerance {tol:.3g}"), ratio, False
    return None, ratio, False


def _verify_case(directory, entry: dict, case: Case, exact: bool, report: VerifyReport,
                 engine: str = "fast") -> list[str]:
    cid = entry["id"]
    arrays = store.load_arrays(directory, entry)                     # hashes, shapes, paths
    want_row = case.to_json()
    if entry["case"] != want_row:
        keys = sorted(k for k in set(want_row) | set(entry["case"]) if want_row.get(k) != entry["case"].get(k))
        return [f"{cid}: the manifest's row differs from the case table in {keys}: the set is stale, rebuild it"]
    problems = []
    redraw = B.case_arrays(case, B.draw(case), [{"outputs": {}, "grads": {}, "state": {}}] * len(case.steps))
    drawn_names = sorted(k for k in arrays if B.is_drawn(k))
    if drawn_names != sorted(redraw):
        return [f"{cid}: drawn arrays {drawn_names} differ from the table's {sorted(redraw)}"]
    for k in drawn_names:
        if redraw[k].dtype != arrays[k].dtype or redraw[k].tobytes() != arrays[k].tobytes():
            problems.append(f"{cid}: {k} differs from a fresh draw of the case table (built with numpy "
                            f"{report.generator.get('numpy')}, running {np.__version__}): stale or tampered")
        if entry["arrays"][k].get("value_dtype") and not B.is_representable(arrays[k], case.dtype):
            problems.append(f"{cid}: {k} holds values that are not {case.dtype} numbers")
    drawn = B.drawn_from_arrays(case, arrays)
    steps = B.expected(case, drawn, engine)
    recomputed = B.case_arrays(case, drawn, steps)
    if sorted(recomputed) != sorted(arrays):
        return problems + [f"{cid}: stored arrays {sorted(arrays)} != recomputed {sorted(recomputed)}"]
    if len(entry["steps"]) != len(steps):
        return problems + [f"{cid}: manifest lists {len(entry['steps'])} steps, the case has {len(steps)}"]
    for i, (m, s) in enumerate(zip(entry["steps"], steps)):
        if m.get("training") != s["training"] or m.get("compare") != s["compare"]:
            problems.append(f"{cid}: step {i}: manifest training/compare {m.get('training')}/{m.get('compare')} "
                            f"!= recomputed {s['training']}/{s['compare']}")
        if not isinstance(m.get("cond"), (int, float)) or abs(m["cond"] - s["cond"]) > 1e-9 * (1 + s["cond"]):
            problems.append(f"{cid}: step {i}: manifest cond {m.get('cond')!r} != recomputed {s['cond']!r}")
    for k in sorted(recomputed):
        if B.is_drawn(k):
            continue
        step = int(k.split(".")[0][4:])
        problem, ratio, same = _compare(k, recomputed[k], arrays[k], steps[step]["cond"], exact)
        report.arrays += 1
        report.bit_identical += same
        if ratio > report.worst and np.isfinite(ratio):
            report.worst, report.worst_where = ratio, f"{cid}:{k}"
        if problem:
            problems.append(f"{cid}: {problem}")
    return problems


def verify(directory, *, cases: Iterable[Case] | None = None, ops: Iterable[str] | None = None,
           exact: bool = False, log: Callable[[str], None] | None = None, engine: str = "fast") -> VerifyReport:
    """Check every hash of the golden set at ``directory`` and recompute every case (module docstring).

    cases: the table the set must match (default: every row of ``CASES``).
    ops:   verify only the cases of these normalizers (default: all).
    exact: demand bit-for-bit equal expected values instead of the documented float64 tolerance.
    engine: recompute with "fast" (default) or "spec", the plain specification (refnorm/specs/): any golden
    value can be reproduced with the plain code.
    Returns a ``VerifyReport`` (``.ok``, ``.summary()``, ``.raise_if_failed()``); an unreadable or
    invalid MANIFEST.json raises ``GoldenError`` at once (nothing in the set can be trusted then).
    """
    t0 = time.perf_counter()
    rows = {c.id: c for c in (CASES if cases is None else cases)}
    manifest = store.read_manifest(directory)
    report = VerifyReport(str(directory), exact, generator=dict(manifest["generator"]))
    report.failures += store.scan(directory, manifest)             # the whole directory, always
    if ops is not None:
        ops = set(ops)
        rows = {k: c for k, c in rows.items() if c.op in ops}
        manifest = {**manifest, "cases": [e for e in manifest["cases"] if e["id"].split("/")[0] in ops]}
    listed = {e["id"] for e in manifest["cases"]}
    report.failures += [f"{cid}: in the case table but not in the golden set: rebuild it"
                        for cid in rows if cid not in listed]
    for entry in manifest["cases"]:
        cid = entry["id"]
        if cid not in rows:
            report.failures.append(f"{cid}: in the golden set but not in the case table: stale, rebuild it")
            continue
        try:
            problems = _verify_case(directory, entry, rows[cid], exact, report, engine)
        except GoldenError as e:
            problems = [str(e)]
        except Exception as e:  # a case the reference can no longer evaluate is a failure, not a crash
            problems = [f"{cid}: recomputation failed: {type(e).__name__}: {e}"]
        report.failures += problems
        report.cases += not problems
        if log:
            log(f"  {'ok  ' if not problems else 'FAIL'} {cid}")
    report.seconds = time.perf_counter() - t0
    return report


# ------------------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class GoldenStep:
    """One call of a golden case. Inputs, cotangents in the case dtype (bfloat16 as
    ml_dtypes.bfloat16); outputs, grads, state: the float64 reference (state: after this call)."""
    training: bool
    inputs: Mapping[str, np.ndarray]
    cotangents: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    grads: Mapping[str, np.ndarray]
    state: Mapping[str, np.ndarray]
    compare: Mapping[str, tuple[str, ...]]    # "outputs", "grads", "state": what a checker compares
    cond: float                               # max |mean|/sqrt(var + eps) over non-constant slices


@dataclass(frozen=True)
class GoldenCase:
    id: str
    op: str
    dtype: str
    regime: str
    config: Mapping
    init_state: Mapping[str, np.ndarray]
    steps: tuple[GoldenStep, ...]
    why: str
    layout: str = "contiguous"      # the memory layout the backend is handed (refnorm.golden.layouts)
    expect_error: bool = False      # the backend must raise on this case (generated cases: expect=error)


def load_case(directory, case_id: str, *, manifest: dict | None = None) -> GoldenCase:
    """One case of the golden set, every file and array checked (``store.load_arrays``)."""
    manifest = manifest or store.read_manifest(directory)
    entry = next((e for e in manifest["cases"] if e["id"] == case_id), None)
    if entry is None:
        raise GoldenError(f"golden case {case_id!r} is not in {directory}/{store.MANIFEST}")
    arrays = store.load_arrays(directory, entry)
    row = entry["case"]
    dtype = row.get("dtype")
    if dtype not in B.STORAGE:
        raise GoldenError(f"golden case {case_id!r}: dtype {dtype!r} is not one of {', '.join(B.STORAGE)}")

    def pick(prefix, cast=False):
        return {k[len(prefix):]: (B.as_case_dtype(v, dtype) if cast else v)
                for k, v in arrays.items() if k.startswith(prefix)}
    steps = []
    for i, m in enumerate(entry["steps"]):
        compare = m.get("compare", {})
        steps.append(GoldenStep(bool(m.get("training")), pick(f"step{i}.input.", True),
                                pick(f"step{i}.cotangent.", True), pick(f"step{i}.output."),
                                pick(f"step{i}.grad."), pick(f"step{i}.state."),
                                {k: tuple(compare.get(k, ())) for k in ("outputs", "grads", "state")},
                                float(m.get("cond", 0.0))))
    return GoldenCase(case_id, row.get("op"), dtype, row.get("regime"), row.get("config"),
                      pick("init.state.", True), tuple(steps), row.get("why", ""))


def iter_cases(directory, *, ops: Iterable[str] | None = None, dtypes: Iterable[str] | None = None
               ) -> Iterator[GoldenCase]:
    """Every case of the golden set (optionally only some ops / dtypes), in manifest order."""
    manifest = store.read_manifest(directory)
    ops = None if ops is None else set(ops)
    dtypes = None if dtypes is None else set(dtypes)
    for e in manifest["cases"]:
        row = e["case"]
        if (ops is None or row.get("op") in ops) and (dtypes is None or row.get("dtype") in dtypes):
            yield load_case(directory, e["id"], manifest=manifest)


# ----------------------------------------------------------------------------------- selection
class SelectionError(RefnormError):
    """Filters that name a case, op, dtype or regime the golden set lacks, or that select no case."""


FLAGS = {"ops": "--ops", "dtypes": "--dtypes", "regimes": "--regimes", "match": "--match", "case_ids": "--case"}


def select(manifest: dict, *, ops: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
           regimes: Iterable[str] | None = None, match: str | None = None,
           case_ids: Iterable[str] | None = None, flags: Mapping[str, str] | None = None,
           directory: str | None = None) -> list[dict]:
    """The manifest entries every given filter accepts, in manifest order (None: no filter).

    ops, dtypes, regimes: the case's op / dtype / regime is one of these; match: a glob on the case id
    (``fnmatch``, e.g. ``'layer_norm/*f16*'``); case_ids: exactly these cases, each of which must also
    pass the other filters. Raises ``SelectionError`` (never an empty selection) naming the filter:
    a case id not in the set (with the closest ids and the ``refnorm golden list`` command), a value no
    case has, a case id the other filters exclude, or filters that together select nothing (with what
    each selects alone). ``flags`` renames the filters in messages (``{"ops": "--refnorm-ops"}``);
    ``directory`` is named in the ``refnorm golden list`` hint.
    """
    flags = {**FLAGS, **(flags or {})}
    entries = manifest["cases"]
    lister = "refnorm golden list" + (f" {directory}" if directory else "")

    def show(values):
        return " ".join(values)
    tests = {}
    for key, field_name, values in (("ops", "op", ops), ("dtypes", "dtype", dtypes), ("regimes", "regime", regimes)):
        if values is None:
            continue
        values = list(values)
        have = sorted({e["case"].get(field_name) for e in entries} - {None})
        bad = [v for v in values if v not in have]
        if bad:
            raise SelectionError(f"{flags[key]} {show(bad)}: no golden case has {field_name} "
                                 f"{', '.join(map(repr, bad))}; the set has: {', '.join(have)}")
        tests[key] = (lambda e, f=field_name, vs=frozenset(values): e["case"].get(f) in vs, show(values))
    if match is not None:
        tests["match"] = (lambda e, m=match: fnmatch.fnmatchcase(e["id"], m), repr(match))
    if case_ids is not None:
        ids = [e["id"] for e in entries]
        by_id = {e["id"]: e for e in entries}
        for cid in case_ids:
            if cid not in by_id:
                close = difflib.get_close_matches(cid, ids, n=3, cutoff=0.6)
                op = cid.split("/")[0]
                hint = f"{lister} --ops {op}" if any(i.startswith(op + "/") for i in ids) else lister
                raise SelectionError(f"{flags['case_ids']} {cid!r}: no such golden case"
                                     + (f"; did you mean {', '.join(close)}?" if close else "")
                                     + f" (list the ids: {hint})")
            for key, (accept, shown) in tests.items():
                if not accept(by_id[cid]):
                    row = by_id[cid]["case"]
                    what = (f" (op {row.get('op')}, dtype {row.get('dtype')}, regime {row.get('regime')})"
                            if key != "match" else "")
                    raise SelectionError(f"{flags['case_ids']} {cid}{what} is excluded by {flags[key]} {shown}: "
                                         f"the filters contradict each other; drop one")
        wanted = set(case_ids)
        tests["case_ids"] = (lambda e: e["id"] in wanted, show(case_ids))
    chosen = [e for e in entries if all(accept(e) for accept, _ in tests.values())]
    if not chosen:
        alone = "; ".join(f"{flags[k]} {shown} alone selects {sum(map(accept, entries))}"
                          for k, (accept, shown) in tests.items())
        given = " ".join(f"{flags[k]} {shown}" for k, (_, shown) in tests.items())
        raise SelectionError(f"no golden case matches {given or 'the set'}"
                             + (f" ({alone})" if len(tests) > 1 or alone else "")
                             + f"; list the ids: {lister}")
    return chosen
