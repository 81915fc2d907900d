"""Layer 4: the checker. Judge a backend's outputs, gradients and state on the golden cases within
derived tolerances (``bounds``, ``precision``; docs/tolerances.md).

    from refnorm.check import run_check, get_backend
    report = run_check(get_backend("torch-cpu"), "golden")
    report.ok, report.summary(), report.to_json()
"""
from .backends import Call, Contract, Returned, get_backend
from .core import CaseResult, Report, check_case, merge_reports, run_check

__all__ = ["run_check", "check_case", "get_backend", "Report", "CaseResult", "Call", "Contract", "Returned"]
