import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))
# the jax backend's persistent compilation cache stays off in the tests (hermetic: nothing written under
# ~/.cache); tests/test_jax_backend.py turns it on, in subprocesses, where it tests it
os.environ.setdefault("REFNORM_JAX_CACHE", "off")

settings.register_profile("default", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("REFNORM_HYPOTHESIS_PROFILE", "default"))


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
