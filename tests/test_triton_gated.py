"""examples/triton_gated.py: the Triton gated RMSNorm / LayerNorm (group_size, both gate sides) passes refnorm's
check in Triton's interpreter (TRITON_INTERPRET=1, no GPU) on every golden gated_norm case, and the planted
wrong-group-size backward (Mamba's layernorm_gated bug with ngroups > 1) fails every case with ngroups > 1 and
is named by the diagnosis. Needs triton (CI: triton==3.9.0); skipped with the reason without it."""
from __future__ import annotations

from helpers import GOLDEN, triton_example

_, E = triton_example("examples.triton_gated")

from refnorm.check.core import run_check  # noqa: E402
from refnorm.golden import store  # noqa: E402
from refnorm.testing import assert_backend_passes  # noqa: E402


def _ngroups(entry):
    gs = entry["case"]["config"].get("group_size")
    return 1 if gs is None else entry["case"]["inputs"]["x"][-1] // gs


def test_example_passes_every_golden_case():
    rep = assert_backend_passes(E.gated_norm_backend, ops=["gated_norm"], golden=GOLDEN, allow_partial=True)
    s = rep.summary()
    assert s["failed"] == 0 and s["errors"] == 0 and s["skipped"] == 0 and s["passed"] >= 20, s
    judged = {c.dtype for c in rep.cases if c.status in ("passed", "partial")}
    assert judged == {"float64", "float32", "float16", "bfloat16"}, judged


def test_planted_wrong_group_size_backward_fails_and_is_named():
    man = store.read_manifest(GOLDEN)
    grouped = {e["id"] for e in man["cases"] if e["case"]["op"] == "gated_norm" and _ngroups(e) > 1}
    assert len(grouped) >= 12, grouped
    rep = run_check(E.buggy("bwd_group_size"), GOLDEN, ops=["gated_norm"])
    failed = {c.id: c for c in rep.cases if c.status == "failed"}
    assert set(failed) == grouped, sorted(set(failed) ^ grouped)
    for c in failed.values():
        assert "grad x" in c.message and c.diagnosis["matched"] == "bwd_group_size", (c.id, c.diagnosis["message"])
        assert c.diagnosis["pitfalls"] == ["R-bwdgroup"]
    # one group: the bug cannot show, and the same kernel passes
    assert all(c.status in ("passed", "partial") for c in rep.cases if c.id not in grouped)
