"""JUnit XML of a check (``refnorm check --junit-xml FILE``), for CI systems.

One ``<testcase>`` per golden case: ``classname`` the op, ``name`` the case id, ``time`` its seconds.
failed -> ``<failure>``, error -> ``<error>`` (message: the case's message; text: the arrays beyond
their bound with their worst elements, and the command that reproduces the case); partial (an array
unconstrained or unchecked, nothing failed) -> ``<failure type="refnorm.partial">`` naming the arrays
not verified, or, with ``accept_partial``, ``<skipped message="partial (accepted): ...">``: never a
plain pass; skipped ->
``<skipped message="reason">``; an expected failure (``--expect-failures``) -> ``<skipped
message="expected failure: why">`` with the failure as its text. A passed or partial case with weakly
verified arrays (fewer than half their elements constrained) says so in ``<system-out>``, and the suite's
property ``arrays_weakly_verified`` counts them. The suite's properties record
the platform (``platform_cpu``, ``platform_flags``, ``platform_gpu``, ``version_numpy``, ...:
check/platform.py). Characters XML 1.0 cannot hold
(control characters from an exception message) are replaced by U+FFFD.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from . import report as R

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text) -> str:
    return _NOT_XML.sub("\ufffd", str(text))


def junit_xml(report, backend_arg: str, golden_arg: str | None = None, accept_partial=False) -> bytes:
    """The report as a JUnit XML document (UTF-8 bytes)."""
    s = report.summary()
    partial = s["partial"]
    suites = ET.Element("testsuites", name="refnorm check")
    suite = ET.SubElement(suites, "testsuite", {
        "name": _clean(f"refnorm check --backend {backend_arg}"), "tests": str(s["cases"]),
        "failures": str(s["failed"] + (0 if accept_partial else partial)), "errors": str(s["errors"]),
        "skipped": str(s["skipped"] + s["expected_failures"] + (partial if accept_partial else 0)),
        "time": f"{report.seconds:.3f}"})
    props = ET.SubElement(suite, "properties")
    for k in ("backend", "golden"):
        ET.SubElement(props, "property", name=k, value=_clean(s[k]))
    for k in ("verified", "failed", "unconstrained", "unchecked"):
        ET.SubElement(props, "property", name=f"arrays_{k}", value=str(s["arrays"][k]))
    ET.SubElement(props, "property", name="arrays_weakly_verified", value=str(s["weakly_verified"]))
    plat = report.platform_info()
    for k, v in (("platform_cpu", plat["cpu"]), ("platform_arch", plat["arch"]),
                 ("platform_flags", ",".join(plat["flags"]) if plat["flags_known"] else "unknown"),
                 ("platform_gpu", f"{plat['gpu']['name']} (driver {plat['gpu']['driver'] or '?'}, "
                                  f"{plat['gpu']['runtime']})" if plat["gpu"] else "none"),
                 *((f"version_{lib}", ver) for lib, ver in plat["versions"].items())):
        ET.SubElement(props, "property", name=k, value=_clean(v))
    for c in report.cases:
        tc = ET.SubElement(suite, "testcase", classname=_clean(c.op), name=_clean(c.id), time=f"{c.seconds:.4f}")
        if c.status in ("failed", "error"):
            el = ET.SubElement(tc, "failure" if c.status == "failed" else "error",
                               message=_clean(c.message + (f" | diagnosis: {c.diagnosis['message']}"
                                                           if c.diagnosis and c.diagnosis.get("message") else "")),
                               type=f"refnorm.{c.status}")
            el.text = _clean(R.case_text(c, backend_arg, golden_arg))
        elif c.status == "partial":
            if accept_partial:
                el = ET.SubElement(tc, "skipped", message=_clean(f"partial (accepted): {c.message}"))
            else:
                el = ET.SubElement(tc, "failure", message=_clean(f"partial: {c.message}"), type="refnorm.partial")
            el.text = _clean(R.case_text(c, backend_arg, golden_arg))
        elif c.status == "skipped":
            ET.SubElement(tc, "skipped", message=_clean(c.message))
        weak = [a for a in c.arrays if a.weak]
        if weak and c.status in ("passed", "partial"):       # a pass still, with what it verified weakly said
            ET.SubElement(tc, "system-out").text = _clean("; ".join(
                f"step {a.step} {R._WHAT[a.part]} {a.name}: {a.shown_verdict}" for a in weak))
        elif c.status == "xfail":
            el = ET.SubElement(tc, "skipped", message=_clean(f"expected failure: {c.expected or c.message}"))
            el.text = _clean(R.case_text(c, backend_arg, golden_arg))
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
