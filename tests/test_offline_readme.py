"""The "Defining a new offline normalizer" example (docs/ops.md, moved there from the README) runs as written,
and does what it says."""
import os
import re

import numpy as np

import refnorm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _example() -> str:
    with open(os.path.join(ROOT, "docs", "ops.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- offline-example -->\s*```python\n(.+?)\n```", text, flags=re.S)
    assert m, "docs/ops.md must hold the offline example in a ```python block after <!-- offline-example -->"
    return m.group(1)


def _batches(rng, k):
    return [(1.0 + rng.uniform(0.5, 3) * rng.standard_normal((4, 3, 5)), rng.standard_normal((4, 3, 5)))
            for _ in range(k)]


def test_readme_offline_example_runs_and_smooths_the_variance():
    rng = np.random.default_rng(11)
    batches = _batches(rng, 6)
    ns = {"batches": batches}
    exec(compile(_example(), "docs/ops.md:offline-example", "exec"), ns)
    st, out, norm = ns["st"], ns["out"], ns["windowed_bn"]
    assert int(st["iters"][0]) == 6
    # call 6 normalized with the mean of the variances of calls 3..6 (window 4, current included)
    want = np.mean([np.moveaxis(x, 1, 0).reshape(3, -1).var(axis=1) for x, _ in batches[2:]], axis=0)
    np.testing.assert_allclose(out["rstd"], 1 / np.sqrt(want + 1e-5), rtol=1e-13)
    # registered as a NormSpec, it is the same normalizer through the contract's checks
    spec = norm.spec()
    assert spec.name == "windowed_bn" and set(spec.state) == {"buffer_var", "ema_gz", "running_mean",
                                                              "running_var", "iters"}


def test_readme_offline_example_with_window_1_and_no_memory_is_batch_norm():
    rng = np.random.default_rng(12)
    ns = {"batches": []}
    exec(compile(_example(), "docs/ops.md:offline-example", "exec"), ns)
    norm = ns["windowed_bn"]
    st = None
    for x, dy in _batches(rng, 3):
        out, st, ctx = norm.forward(x, state=st, window=1, momentum=0.0)
        dx, dw, db, st = norm.backward(dy, ctx)
        ref = refnorm.evaluate("batch_norm", {"x": x}, grad_outputs={"y": dy})
        np.testing.assert_allclose(out["y"], ref.outputs["y"], rtol=0, atol=1e-14)
        np.testing.assert_allclose(dx, ref.grads["x"], rtol=0, atol=1e-13 * np.abs(ref.grads["x"]).max())
