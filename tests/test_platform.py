"""Issue 34, item 11: every report records the platform (CPU model and numeric flags, GPU, library
versions: refnorm/check/platform.py), and a known-failure entry can be scoped to a platform
(``platform=avx512_fp16`` / ``platform=!avx512_fp16``)."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from refnorm.check import platform as P
from refnorm.check.core import read_expected_failures
from refnorm.cli import main
from refnorm.golden.store import GoldenError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")


def _a_case():
    with open(os.path.join(GOLDEN, "MANIFEST.json"), encoding="utf-8") as f:
        man = json.load(f)
    return next(e["id"] for e in man["cases"] if e["case"]["op"] == "layer_norm" and e["case"]["dtype"] == "float32")


INTEL = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx avx2 fma f16c avx512f avx512_bf16 avx512_fp16 amx_tile amx_bf16
processor\t: 1
model name\t: another
flags\t\t: fpu
"""
AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu sse2 avx avx2 fma f16c avx512f avx512_bf16 avx512_vnni
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd fphp asimdhp sve bf16
"""


def test_cpuinfo_parse_keeps_the_first_processor_and_only_numeric_flags():
    assert P.parse_cpuinfo(INTEL) == ("Intel(R) Xeon(R) Platinum 8480+",
                                      {"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile",
                                       "amx_bf16"})
    model, flags = P.parse_cpuinfo(AMD)
    assert model == "AMD EPYC 9654 96-Core Processor" and "avx512_fp16" not in flags and "avx512_bf16" in flags
    assert P.parse_cpuinfo(ARM) == ("", {"fphp", "asimdhp", "sve", "bf16"})


def test_the_probe_imports_no_framework():
    code = ("import sys\nfrom refnorm.check import platform as P\np = P.probe()\nP.describe(p)\n"
            "bad = [m for m in ('torch', 'jax', 'jaxlib', 'onnxruntime', 'triton') if m in sys.modules]\n"
            "assert not bad, bad\nassert set(p['versions']) == {'python', 'numpy'}, p\nassert p['gpu'] is None\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr


def test_a_framework_in_use_is_recorded_with_its_version(monkeypatch):
    fake = type(sys)("onnxruntime")
    fake.__version__ = "9.9.9"
    monkeypatch.setitem(sys.modules, "onnxruntime", fake)
    p = P.probe()
    assert p["versions"]["onnxruntime"] == "9.9.9"
    assert "onnxruntime 9.9.9" in P.describe(p) and "numpy " in P.describe(p)


def test_every_report_records_the_platform(tmp_path, capsys):
    out, xml, rep = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "rep"
    rc = main(["check", "--backend", "numpy", "--golden", GOLDEN, "--case", _a_case(), "--no-progress",
               "--json", str(out), "--junit-xml", str(xml), "--report", str(rep)])
    text = capsys.readouterr().out
    assert rc == 0, text
    here = P.cpu()
    line = next(ln for ln in text.splitlines() if ln.startswith("platform: "))
    assert here["model"] in line and all(f in line for f in here["flags"]) and "numpy " in line
    plat = json.loads(out.read_text())["platform"]
    assert plat["cpu"] == here["model"] and plat["flags"] == here["flags"] and plat["versions"]["numpy"]
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert props["platform_cpu"] == here["model"] and props["platform_flags"] == ",".join(here["flags"])
    assert props["version_numpy"] == plat["versions"]["numpy"] and props["platform_gpu"] == "none"
    assert line in (rep / "summary.md").read_text()


# ----------------------------------------------------------------- platform-scoped expected failures
def _write(tmp_path, text):
    f = tmp_path / "xf.txt"
    f.write_text(text)
    return str(f)


def test_a_scoped_entry_applies_only_where_its_platform_matches(tmp_path):
    f = _write(tmp_path, "a/b  fails=output.y platform=!avx512_fp16  float32 intermediates here\n"
                         "a/b  fails=grad.x,output.y platform=avx512_fp16  native float16 there\n"
                         "c/d  fails=grad.x platform=avx512_fp16,amx_bf16  both flags needed\n"
                         "e/f  fails=grad.x  everywhere\n")
    amd = read_expected_failures(f, ["avx512_bf16", "fma"])
    assert set(amd) == {"a/b", "e/f"} and amd["a/b"].fails == {"output.y"}
    intel = read_expected_failures(f, ["avx512_fp16", "amx_bf16"])
    assert set(intel) == {"a/b", "c/d", "e/f"} and intel["a/b"].fails == {"grad.x", "output.y"}
    assert set(read_expected_failures(f, ["avx512_fp16"])) == {"a/b", "e/f"}
    assert "platform=avx512_fp16" in intel["a/b"].describe()


def test_the_default_platform_is_this_machine(tmp_path):
    f = _write(tmp_path, "a/b  fails=output.y platform=avx512_fp16  with\n"
                         "a/b  fails=grad.x platform=!avx512_fp16  without\n")
    e = read_expected_failures(f)["a/b"]
    assert e.fails == ({"output.y"} if "avx512_fp16" in P.cpu()["flags"] else {"grad.x"})


@pytest.mark.parametrize("line, message", [
    ("a/b  fails=output.y platform=avx512fp16  misspelt", "unknown platform flag 'avx512fp16'"),
    ("a/b  fails=output.y platform=  empty", "platform= has no value"),
    ("a/b  fails=output.y platform=fma,  empty token", "unknown platform flag ''"),
    ("a/b  fails=output.y platform=fma,!fma  never", "both required and excluded"),
    ("a/b  fails=output.y  reason first platform=fma", "come before the reason"),
    # layout= scopes (issue 35)
    ("a/b  fails=output.y layout=channel_last  misspelt", "unknown layout 'channel_last'"),
    ("a/b  fails=output.y layout=  empty", "layout= has no value"),
    ("a/b  fails=output.y layout=strided,!offset  mixed", "expected LAYOUT"),
    ("a/b  fails=output.y  reason first layout=strided", "come before the reason"),
])
def test_a_bad_platform_or_layout_scope_is_a_clear_error(tmp_path, line, message):
    with pytest.raises(GoldenError, match=message) as e:
        read_expected_failures(_write(tmp_path, line + "\n"), [])
    assert "xf.txt:1" in str(e.value)


@pytest.mark.parametrize("second", ["a/b  fails=grad.x  everywhere",
                                    "a/b  fails=grad.x platform=fma  overlaps avx512_fp16 CPUs with fma",
                                    "a/b  fails=grad.x platform=avx512_fp16  the same scope"])
def test_a_case_listed_twice_for_one_platform_is_an_error_on_every_cpu(tmp_path, second):
    f = _write(tmp_path, "a/b  fails=output.y platform=avx512_fp16  first\n" + second + "\n")
    for flags in ([], ["avx512_fp16", "fma"]):                 # found wherever the list is read
        with pytest.raises(GoldenError, match="listed twice"):
            read_expected_failures(f, flags)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "known_failures", "*.txt"))))
def test_every_shipped_list_parses_for_cpus_with_and_without_avx512_fp16(path):
    with_ = read_expected_failures(path, ["avx512_fp16", "avx512_bf16", "fma"])
    without = read_expected_failures(path, ["avx512_bf16", "fma"])
    assert with_ or without
    for entries, flags in ((with_, {"avx512_fp16"}), (without, set())):
        assert all(P.scope_matches(e.platform, flags) for e in entries.values())


def test_a_gpu_in_use_is_recorded_with_its_name_and_driver(monkeypatch):
    """torch's CUDA initialized in this process (a GPU backend ran): its device name, the runtime and the
    kernel driver's version (/proc/driver/nvidia/version, "" where there is none) are recorded."""
    import types
    fake = types.SimpleNamespace(
        __version__="0.0-fake",
        cuda=types.SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 0,
                                   get_device_name=lambda i: "Fake GPU 80GB"),
        version=types.SimpleNamespace(cuda="12.4"))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(P, "_nvidia_driver", lambda: "550.54.15")
    p = P.probe()
    assert p["gpu"] == {"name": "Fake GPU 80GB", "driver": "550.54.15", "runtime": "CUDA 12.4"}
    assert "GPU Fake GPU 80GB (driver 550.54.15, CUDA 12.4)" in P.describe(p) and "torch 0.0-fake" in P.describe(p)
    fake.cuda.is_initialized = lambda: False                  # torch imported, CUDA never used: no GPU
    assert P.probe()["gpu"] is None


# ------------------------------------------------------------------ layout= scopes (issue 35)
def test_a_layout_scoped_entry_applies_only_in_its_layouts(tmp_path):
    f = _write(tmp_path, "a/b  fails=output.y layout=channels_last  the channels_last kernel\n"
                         "a/b  fails=grad.x layout=!channels_last  the other kernels\n"
                         "c/d  fails=grad.x layout=strided,transposed  non-contiguous only\n"
                         "e/f  fails=grad.x  every layout\n")
    cl = read_expected_failures(f, [], layout="channels_last")
    assert set(cl) == {"a/b", "e/f"} and cl["a/b"].fails == {"output.y"}
    assert "layout=channels_last" in cl["a/b"].describe() and "layout" not in cl["e/f"].describe()
    st = read_expected_failures(f, [], layout="strided")
    assert set(st) == {"a/b", "c/d", "e/f"} and st["a/b"].fails == {"grad.x"}
    assert set(read_expected_failures(f, [])) == {"a/b", "e/f"}          # the default: the contiguous run


def test_a_case_listed_twice_for_one_layout_is_an_error(tmp_path):
    f = _write(tmp_path, "a/b  fails=output.y layout=channels_last,strided  first\n"
                         "a/b  fails=grad.x layout=!contiguous  overlaps\n")
    with pytest.raises(GoldenError, match=r"listed twice .*channels_last, strided"):
        read_expected_failures(f, [])


def test_an_entry_applies_to_a_case_only_in_its_layouts():
    from refnorm.check.core import CaseResult, Report, apply_expected_failures
    entry = read_expected_failures.__globals__["ExpectedFailure"](frozenset({"output.y"}), None, None, "why",
                                                                   (), frozenset({"channels_last"}))
    rep = Report("b", "g", [CaseResult("a/b", "layer_norm", "float32", "error", "boom", layout="contiguous"),
                            CaseResult("a/b", "layer_norm", "float32", "error", "boom", layout="channels_last")])
    apply_expected_failures(rep, {"a/b": entry}, ["a/b"])
    assert not rep.cases[0].expected and rep.cases[0].message == "boom"
    assert "listed as an expected failure" in rep.cases[1].message
