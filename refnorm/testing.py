"""One assertion for one call of your kernel, judged like ``refnorm check`` judges a golden case.

    from refnorm.testing import assert_close_to_reference
    assert_close_to_reference("layer_norm", {"x": x, "weight": w, "bias": b}, {"y": y},
                              config={"normalized_shape": [768]},
                              cotangents={"y": dy}, grads={"x": dx, "weight": dw, "bias": db})

``inputs`` and ``cotangents`` are what your kernel was given (NumPy arrays in the case dtype, e.g.
float16 or ml_dtypes.bfloat16; the case dtype is the least precise floating input unless ``dtype`` is
given); ``outputs``, ``grads`` and ``new_state`` are what it returned, as NumPy arrays in their own
dtype (no less precise than the case dtype). The float64 reference is computed from the very inputs,
the per-element bound E is derived under ``contract`` (a ``Contract``, or its one-line string, e.g.
"rounds xhat=input, dy_xhat=input": refnorm/check/contracts.py; docs/tolerances.md), and every element must
pass the rounding-interval test. On failure: AssertionError with the check's text (how far beyond the
bound, how many elements, the worst ones with got / expected / bound).

What is judged: every output given (the differentiable ones, ``y`` or ``w``, are required; statistics
such as ``mean``/``rstd`` are judged when given); with ``grads``, the gradient of every floating input
(``cotangents`` required); with ``new_state``, every state entry. Raises
``refnorm.check.bounds.NotBounded`` (a RefnormError) for an op without a derived tolerance. A name the
op does not have (``"Mean"``, ``"inv_std"``) is an AssertionError naming the names it has. An array
returned in a more precise dtype than the case dtype is rounded to the case dtype and judged as it
(refnorm.check.core). An array whose bound is infinite or at least its own scale everywhere verifies
nothing ("unconstrained"): AssertionError naming it, unless ``allow_partial=True`` (then it is returned
with ``verdict == "unconstrained"``).
``assert_backend_passes(backend, ops=..., dtypes=...)`` judges a whole backend (your kernel wrapped by
``refnorm.check.backends.from_torch``) on the golden set, as ``refnorm check`` does, in one assertion.
Never imports pytest, hypothesis or a framework.
"""
from __future__ import annotations

import numpy as np

from . import registry
from .check import report as R
from .check.backends import loaded_as
from .check.backends.base import Contract
from .check.core import failure_message, judge_call, partial_message
from .check.precision import RANK, dtype_name
from .errors import RefnormError


def not_differentiable(op) -> tuple:
    """The inputs of ``op`` whose gradient is not part of the contract: its masks (``NormSpec.masks``:
    unified_norm's pad_mask, add_norm's keep-masks mask and mask1; 0/1 samples)."""
    return tuple(registry.get(op).masks)


def case_dtype(inputs) -> str:
    """The least precise floating dtype among ``inputs`` (refnorm's name: float64 ... bfloat16)."""
    names = [dtype_name(np.asarray(v).dtype) for v in inputs.values()]
    names = [n for n in names if n]
    if not names:
        raise TypeError("assert_close_to_reference: no input has a floating dtype (float64, float32, float16, "
                        "bfloat16); pass dtype=")
    return min(names, key=RANK.__getitem__)


def assert_close_to_reference(op, inputs, outputs, *, config=None, grads=None, cotangents=None, state=None,
                              new_state=None, training=True, dtype=None, contract=Contract("strict", "block"),
                              allow_partial=False):
    """Assert that one call of a kernel is within the derived bound of the float64 reference (module
    docstring). Returns the list of judged ``ArrayResult`` (ratio = error / bound, ``verdict``) when it is."""
    if isinstance(contract, str):              # the one-line syntax (refnorm.check.contracts.parse)
        from .check.backends.base import parse_contract
        contract = parse_contract(contract)
    if contract.kind == "exact":
        raise ValueError("contract 'exact' judges refnorm's own rounded reference (the numpy backend); "
                         "a kernel declares strict, stats_d or epi_d")
    if grads and not cotangents:                # (grads={} of a forward-only op: nothing to judge)
        raise ValueError("grads given without the cotangents they were computed from (cotangents=)")
    config, cotangents, state = dict(config or {}), dict(cotangents or {}), dict(state or {})
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    dtype = dtype or case_dtype(inputs)
    masks = not_differentiable(op)

    def compare(ref):        # what the reference returns for this call (of its first row, in blocks)
        return {"outputs": tuple(ref.outputs),
                "grads": tuple(k for k in ref.grads if k not in masks) if grads is not None else (),
                "state": tuple(ref.state) if new_state is not None else ()}
    got = {"outputs": dict(outputs), "grads": dict(grads or {}), "state": dict(new_state or {})}
    arrays, unchecked = [], []
    where = f"{op} [{dtype}, contract {contract.describe()}]"
    try:
        _, _, compare = judge_call(0, op, dtype, config, training, inputs, cotangents, state, got, compare,
                                   grads is not None, contract, arrays, unchecked)
    except RefnormError:              # bad arguments (op, config, inputs) or no derived bound: not a verdict
        raise
    except (ValueError, TypeError) as e:
        raise AssertionError(f"{where}: {e}") from None
    unknown = sorted(f"{part} {k!r}" for part, d in got.items() for k in d
                     if k not in compare[part] and not (part == "grads" and k in masks))
    if unknown:
        raise AssertionError(f"{where}: {op} has no {', '.join(unknown)} for this call")
    if any(not a.passed for a in arrays):
        raise AssertionError("\n".join([f"{where}: {failure_message(arrays)}", *R.array_lines(arrays)]))
    if not allow_partial and any(a.verdict == "unconstrained" for a in arrays):
        raise AssertionError(f"{where}: not verified: {partial_message(arrays, [], {})} "
                             "(allow_partial=True accepts this)")
    return arrays


def assert_generated_case_passes(backend, recipe: str, *, allow_partial=False, timeout=60.0):
    """Judge ``backend`` (a refnorm backend object) on one generated case, ``recipe`` as for
    ``refnorm check --generate`` (e.g. ``"rms_norm shape=300x1027 dtype=bfloat16 layout=strided"``).
    Returns the ``CaseResult``; AssertionError with the check's text unless it passed (or, with
    ``allow_partial``, was partial); a case too big for this machine's memory is an AssertionError too
    (it was not judged)."""
    from .check.core import run_generated
    from .golden import generate
    res = run_generated(backend, [generate.parse(recipe)], timeout=timeout).cases[0]
    if res.status == "passed" or (allow_partial and res.status == "partial"):
        return res
    raise AssertionError(R.case_text(res, loaded_as(backend)))


def assert_backend_passes(backend, *, ops=None, dtypes=None, case_ids=None, golden=None, layout="contiguous",
                          allow_partial=False, expect_failures=None, timeout=60.0):
    """Judge ``backend`` (a backend object, e.g. ``refnorm.check.backends.from_torch(fn, op, contract=...)``)
    on the golden set, as ``refnorm check`` does: ``golden`` defaults as for ``refnorm check``; ``ops``,
    ``dtypes``, ``case_ids`` and ``layout`` select as its ``--ops``, ``--dtypes``, ``--case`` and
    ``--layout``; ``expect_failures`` is a known-failures file (or a list's bare name). Returns the
    ``Report``. AssertionError with the check's text (every failed or errored case, its worst elements
    and how to reproduce it: ``refnorm check --backend ...`` for a backend ``get_backend`` loaded, else
    this call with ``case_ids=[...]``) unless every judged case passed (partial ones too with ``allow_partial``);
    also when nothing was judged (every case skipped: the skip reasons are in the message) and when the
    backend is unavailable."""
    from .check.core import apply_expected_failures, read_expected_failures, run_check
    from .golden import store
    name = getattr(backend, "name", type(backend).__name__)
    reason = backend.available()
    if reason:
        raise AssertionError(f"backend {name} is unavailable: {reason}")
    given, golden = golden, golden or store.find_golden()
    report = run_check(backend, golden, ops=ops, dtypes=dtypes, case_ids=case_ids, timeout=timeout, layout=layout)
    if expect_failures is not None:
        expected = read_expected_failures(store.find_expected_failures(expect_failures), layout=layout)
        apply_expected_failures(report, expected, [e["id"] for e in store.read_manifest(golden)["cases"]])
    if report.verdict == "ok" or (allow_partial and report.verdict == "partial"):
        return report
    parts = [R.summary_line(report, accept_partial=allow_partial), R.table(report)]
    parts += [t for t in (R.failures(report, loaded_as(backend), given), "" if allow_partial else R.partials(report),
                          R.skips(report)) if t]
    raise AssertionError("\n".join(parts))
