import os
import sys

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))
# the jax backend's persistent compilation cache stays off in the tests (hermetic: nothing written under
# ~/.cache); tests/test_jax_backend.py turns it on, in subprocesses, where it tests it
os.environ.setdefault("REFNORM_JAX_CACHE", "off")

settings.register_profile("default", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("quick", max_examples=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# hypothesis: "default" (30 examples) in the thorough test profile (CI), "quick" (15) in the quick one
settings.load_profile(os.environ.get("REFNORM_HYPOTHESIS_PROFILE") or
                      ("default" if os.environ.get("REFNORM_TESTS") == "thorough" else "quick"))

# Two test profiles (README, "Running the tests"): "quick", the default a contributor runs, and "thorough",
# what .ci/run runs: every test. A test marked ``thorough`` (slow, and covered in kind by a quicker test of
# the quick profile) is skipped in the quick profile, saying so.
PROFILES = ("quick", "thorough")
PROFILE = os.environ.get("REFNORM_TESTS", "quick")


def pytest_configure(config):
    if PROFILE not in PROFILES:
        raise pytest.UsageError(f"REFNORM_TESTS={PROFILE!r}: expected one of {', '.join(PROFILES)}")


def pytest_collection_modifyitems(config, items):
    if PROFILE == "thorough":
        return
    skip = pytest.mark.skip(reason="thorough profile only (REFNORM_TESTS=thorough, as .ci/run runs the suite)")
    for item in items:
        if "thorough" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    from helpers import WORST
    if not WORST:
        return
    terminalreporter.section("refnorm: worst relative errors measured in this run")
    names = sorted({n for n, _ in WORST})
    kinds = ["mpmath", "mpmath/(1+cond)", "torch", "transcription"]
    terminalreporter.write_line(f"{'normalizer':26s}" + "".join(f"{k:>18s}" for k in kinds))
    for n in names:
        cells = "".join(f"{WORST[(n, k)]:18.2e}" if (n, k) in WORST else f"{'-':>18s}" for k in kinds)
        terminalreporter.write_line(f"{n:26s}{cells}")
