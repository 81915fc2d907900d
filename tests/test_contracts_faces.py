"""A contract declared from every face (refnorm/check/contracts.py): ``--backend-option contract=...``
(the CLI and the pytest plugin share get_backend), ``from_torch(..., contract=...)``, ``refnorm.testing``;
the report's CONTRACT line and the JSON's contract and contract_points."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from refnorm.check.backends import DeclaredContract, get_backend, with_contract
from refnorm.check.backends.base import Call, Contract, parse_contract
from refnorm.check.backends.plugin import BackendLoadError
from refnorm.cli import main
from refnorm.testing import assert_close_to_reference

LLAMA = "rounds xhat=input, dy_xhat=input"


def _call():
    return Call("rms_norm", "float16", {"normalized_shape": [8]}, True, {"x": np.ones((2, 8), np.float16)})


def test_a_backend_option_declares_the_contract_of_any_backend():
    b = get_backend("numpy", {"contract": LLAMA})
    assert isinstance(b, DeclaredContract) and b.name == "numpy"          # every other member is the backend's
    assert b.contract(_call()) == parse_contract(LLAMA) == Contract(rounds={"xhat": "input", "dy_xhat": "input"})
    assert get_backend("numpy", {"contract": "stats_d/serial"}).contract(_call()) == Contract("stats_d", "serial")
    import pickle
    again = pickle.loads(pickle.dumps(b))          # --isolate and process pools hand backends over
    assert again.name == "numpy" and again.contract(_call()) == b.contract(_call())


def test_a_bad_contract_option_is_a_load_error_naming_the_bad_part():
    with pytest.raises(BackendLoadError, match=r"contract='rounds xhat=float8'.*dtype 'float8'"):
        with_contract(object(), "rounds xhat=float8")


def test_the_cli_judges_under_the_declared_contract_and_reports_it(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "r.json"
    rc = main(["check", "--backend", "torch-cpu", "--ops", "rms_norm", "--dtypes", "float16", "--no-progress",
               "--backend-option", f"contract={LLAMA}", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc in (0, 1, 4)
    cases = [c for c in json.loads(out.read_text())["cases"] if c["status"] != "skipped"]
    assert cases and all(c["contract"] == "rounds xhat=input, dy_xhat=input; reduction block" for c in cases)
    assert all(c["contract_points"]["rounds"] == {"xhat": "input", "dy_xhat": "input"} for c in cases)
    assert f"CONTRACT rounds xhat=input, dy_xhat=input; reduction block: {len(cases)} case(s)" in text


def test_the_cli_refuses_a_bad_contract(capsys):
    rc = main(["check", "--backend", "numpy", "--ops", "rms_norm", "--no-progress",
               "--backend-option", "contract=rounds x_hat=input"])
    assert rc == 2 and "unknown point 'x_hat'" in capsys.readouterr().err


def test_from_torch_takes_the_one_line_syntax():
    pytest.importorskip("torch")
    import torch.nn.functional as F

    from refnorm.check.backends import from_torch
    b = from_torch(lambda x, weight, eps: F.rms_norm(x, x.shape[-1:], weight, eps), "rms_norm", contract=LLAMA)
    assert b.contract(_call()) == parse_contract(LLAMA)
    with pytest.raises(ValueError, match="from_torch: contract 'rounds x_hat=input'.*unknown point 'x_hat'"):
        from_torch(F.rms_norm, "rms_norm", contract="rounds x_hat=input")


def test_refnorm_testing_takes_the_one_line_syntax_and_names_it():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(np.float16)
    w = np.ones(64, np.float16)
    xf = x.astype(np.float32)
    r = 1 / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + np.float32(1e-5))
    y = ((xf * r).astype(np.float16).astype(np.float32) * w.astype(np.float32)).astype(np.float16)   # x_hat rounded
    cfg = {"normalized_shape": [64], "eps": 1e-5}
    assert_close_to_reference("rms_norm", {"x": x, "weight": w}, {"y": y}, config=cfg, contract="rounds xhat=input")
    yb = y.copy()
    yb[0, 0] = np.float16(float(yb[0, 0]) + 0.05)
    with pytest.raises(AssertionError, match=r"rms_norm \[float16, contract rounds xhat=input; reduction block\]"):
        assert_close_to_reference("rms_norm", {"x": x, "weight": w}, {"y": yb}, config=cfg,
                                  contract="rounds xhat=input")


def test_a_case_whose_op_has_no_bound_for_the_declared_points_is_skipped_naming_them():
    from refnorm.check.core import run_check
    golden = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")
    rep = run_check(get_backend("numpy", {"contract": "rounds xhat=input"}), golden, ops=["group_norm"],
                    dtypes=["float32"])
    assert rep.cases and all(c.status == "skipped" and "group_norm: a contract beyond the presets" in c.message
                             for c in rep.cases)


pytest_plugins = ["pytester"]


def test_the_pytest_plugin_takes_the_contract_option(pytester, monkeypatch):
    import importlib.metadata
    if not any(ep.name == "refnorm" for ep in importlib.metadata.entry_points(group="pytest11")):
        pytest.skip("the pytest11 entry point is not installed: run pip install -e .")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    r = pytester.runpytest_subprocess("--refnorm-backend", "numpy", f"--refnorm-golden={os.path.join(root, 'golden')}",
                                      "--refnorm-ops", "group_norm", "--refnorm-dtypes", "float32",
                                      "--refnorm-backend-option", "contract=rounds xhat=input", "-rs")
    r.stdout.fnmatch_lines(["*group_norm: a contract beyond the presets (rounds xhat=input; reduction block)*"])
    assert r.parseoutcomes().get("skipped", 0) > 0 and "failed" not in r.parseoutcomes()
