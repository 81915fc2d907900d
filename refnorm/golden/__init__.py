"""Layer 3: the golden data set, ground truth for checking backends (issue 5).

    refnorm.golden.commands.build(directory)        regenerate golden/ from the case table, atomically
    refnorm.golden.verify(directory) -> report      check every hash, recompute every case
    refnorm.golden.load_case(directory, case_id)    one case, every file and array checked
    refnorm.golden.iter_cases(directory)            all cases
    refnorm.golden.CASES                            the declarative case table (cases.py)

Modules: ``cases`` (the table), ``build`` (drawing inputs and computing expected values),
``store`` (the .npz/MANIFEST.json format, atomic writes, safe reads), ``commands`` (the above).
Imports refnorm, numpy and ml_dtypes only; never a framework.

``build`` is not re-exported here: the name ``refnorm.golden.build`` is the module build.py.
"""
from .cases import CASES, Case
from .commands import BuildReport, GoldenCase, GoldenStep, VerifyReport, iter_cases, load_case, verify
from .store import GoldenError

DEFAULT_DIRECTORY = "golden"
"""The checked-in set's directory, relative to the repository root."""

__all__ = ["CASES", "Case", "verify", "load_case", "iter_cases", "GoldenError", "GoldenCase",
           "GoldenStep", "BuildReport", "VerifyReport", "DEFAULT_DIRECTORY"]
