"""The packaged data and where it is found.

A wheel built from the checkout carries the golden set and the known-failure lists as refnorm/_data/
(setup.py's build_py); installed into a fresh virtual environment, outside the checkout, `refnorm check`
finds the packaged set, verifies it on load, and `--expect-failures NAME` finds a packaged list. The
sdist carries golden/ and known_failures/ too. And the order in which the default golden set is looked
up ($REFNORM_GOLDEN, ./golden, the checkout's, the packaged copy), the same in the code and README.md.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from refnorm.cli import main
from refnorm.golden import store
from refnorm.golden.store import GoldenError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
KNOWN = os.path.join(ROOT, "known_failures")
# what a build leaves in a checkout (.gitignore), and the checkout's own environments: not copied
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv*", ".tox", "build", "dist", "*.egg-info", "__pycache__",
                                     ".pytest_cache", ".hypothesis", ".golden.*", "*.so")


def _run(cmd, *, ok=True, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if ok:
        assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _manifest_files():
    with open(os.path.join(GOLDEN, store.MANIFEST), encoding="utf-8") as f:
        return [e["file"] for e in json.load(f)["cases"]]


def _known_lists():
    return sorted(n for n in os.listdir(KNOWN) if n.endswith(".txt"))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A copy of the checkout's source (pip builds in the source tree: building in the checkout itself
    would leave build/ there, reuse a stale one, and collide with a concurrent run)."""
    src = tmp_path_factory.mktemp("checkout") / "refnorm"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_NOT_SOURCE)
    return src


@pytest.fixture(scope="module")
def installed(source, tmp_path_factory):
    """The wheel built from the checkout, installed into a fresh venv; (wheel, venv python, its bin
    directory, its site-packages, the environment and the working directory to run it with)."""
    tmp = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: the running environment's setuptools, no network; the C extension is
    # optional, so the wheel builds without a compiler too
    _run([sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", tmp / "dist"], cwd=source)
    wheels = list((tmp / "dist").glob("refnorm-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / ("python.exe" if os.name == "nt" else "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", store.GOLDEN_ENV, "VIRTUAL_ENV")}
    env["PATH"] = str(bindir) + os.pathsep + env.get("PATH", "")
    purelib = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env).stdout.strip()
    _run([py, "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall", "-q", wheels[0]], env=env)
    if sys.prefix != sys.base_prefix:
        # this interpreter is itself a venv: --system-site-packages reaches the base interpreter's
        # packages, not this one's (numpy, ...). Its site-packages as plain path lines, after the new
        # venv's own site-packages: its .pth files are not run, so an editable refnorm there is not
        # activated, and an installed one is shadowed by the wheel's (asserted below).
        with open(os.path.join(purelib, "_parent_env.pth"), "w") as f:
            f.write("".join(p + "\n" for p in site.getsitepackages()))
    work = tmp / "work"
    work.mkdir()
    return {"wheel": wheels[0], "py": py, "bin": bindir, "purelib": purelib, "env": env, "cwd": work}


def _in_venv(inst, args, ok=True):
    return _run(args, ok=ok, env=inst["env"], cwd=inst["cwd"])


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_wheel_carries_the_golden_set_and_the_known_failure_lists(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    want = {"refnorm/_data/golden/" + f for f in [store.MANIFEST] + _manifest_files()}
    want |= {"refnorm/_data/known_failures/" + n for n in _known_lists()}
    assert not want - names, sorted(want - names)[:5]
    assert not {n for n in names if n.startswith("refnorm/_data/")} - want, "nothing else in refnorm/_data"


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_installed_refnorm_comes_from_the_venv_and_finds_the_packaged_data(installed):
    script = ("import json, refnorm; from refnorm.golden import store; from refnorm.cli import default_golden_dir; "
              "print(json.dumps({'file': refnorm.__file__, 'golden': default_golden_dir(), "
              "'checkout': store.checkout_dir(), 'torch': store.find_expected_failures('torch-cpu'), "
              "'lists': sorted(store.known_failure_lists())}))")
    got = json.loads(_in_venv(installed, [installed["py"], "-c", script]).stdout)
    site_pkgs = os.path.realpath(installed["purelib"])
    assert os.path.realpath(got["file"]) == os.path.join(site_pkgs, "refnorm", "__init__.py"), \
        f"refnorm imported from {got['file']}, not from the venv's {site_pkgs} (the editable checkout won?)"
    packaged = os.path.join(site_pkgs, "refnorm", "_data")
    assert got["checkout"] is None
    assert os.path.realpath(got["golden"]) == os.path.join(packaged, "golden")
    assert os.path.realpath(got["torch"]) == os.path.join(packaged, "known_failures", "torch-cpu.txt")
    assert got["lists"] == sorted(n[:-4] for n in _known_lists())
    for rel in [store.MANIFEST] + _manifest_files()[:20]:         # the copy is byte for byte the checkout's
        with open(os.path.join(GOLDEN, rel), "rb") as a, open(os.path.join(packaged, "golden", rel), "rb") as b:
            assert a.read() == b.read(), rel
    for n in _known_lists():
        with open(os.path.join(KNOWN, n), "rb") as a, open(os.path.join(packaged, "known_failures", n), "rb") as b:
            assert a.read() == b.read(), n


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_installed_check_runs_on_the_packaged_set(installed):
    refnorm = installed["bin"] / "refnorm"
    r = _in_venv(installed, [refnorm, "check", "--backend", "numpy", "--ops", "layer_norm", "--no-progress"])
    assert "layer_norm" in r.stdout
    # a packaged known-failures list by name (its cases are of other ops: none is run, every id is known)
    _in_venv(installed, [refnorm, "check", "--backend", "numpy", "--ops", "layer_norm", "--no-progress",
                         "--expect-failures", "torch-cpu"])
    r = _in_venv(installed, [refnorm, "check", "--backend", "numpy", "--ops", "layer_norm", "--no-progress",
                             "--expect-failures", "no-such-list"], ok=False)
    assert r.returncode == 2 and "'no-such-list' does not exist" in r.stderr and "torch-cpu" in r.stderr, r.stderr


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_packaged_set_is_verified_on_load(installed):
    """The packaged copy goes through the same checks as any set: one flipped byte is an error (exit 2)."""
    case = next(f for f in _manifest_files() if f.startswith("layer_norm/"))
    path = os.path.join(installed["purelib"], "refnorm", "_data", "golden", case)
    data = Path(path).read_bytes()
    try:
        with open(path, "wb") as f:
            f.write(data[:100] + bytes([data[100] ^ 1]) + data[101:])
        r = _in_venv(installed, [installed["bin"] / "refnorm", "check", "--backend", "numpy", "--case",
                                 case[:-4], "--no-progress"], ok=False)
        assert r.returncode == 2 and "sha256" in r.stderr, (r.returncode, r.stdout, r.stderr)
    finally:
        with open(path, "wb") as f:
            f.write(data)


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_sdist_carries_golden_and_known_failures(source, tmp_path):
    _run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(tmp_path)!r})"],
         cwd=source)
    (sdist,) = tmp_path.glob("refnorm-*.tar.gz")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    want = {"golden/" + f for f in [store.MANIFEST] + _manifest_files()} | {"known_failures/" + n for n in _known_lists()}
    assert not want - names, sorted(want - names)[:5]


# --------------------------------------------------------------------------------- lookup order
def _golden_set(d):
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, store.MANIFEST), "w").close()
    return str(d)


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A cwd, a checkout and a packaged data directory, all empty to begin with."""
    cwd, checkout, data = tmp_path / "cwd", tmp_path / "checkout", tmp_path / "site" / "refnorm" / "_data"
    for d in (cwd, checkout, data):
        d.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(store.GOLDEN_ENV, raising=False)
    monkeypatch.setattr(store, "checkout_dir", lambda: str(checkout))
    monkeypatch.setattr(store, "package_data_dir", lambda: str(data))
    return {"cwd": cwd, "checkout": checkout, "data": data, "env": tmp_path / "env"}


def test_golden_lookup_order(places, monkeypatch):
    """--golden, then $REFNORM_GOLDEN, then ./golden, then the checkout's golden/, then the packaged copy."""
    packaged = _golden_set(places["data"] / "golden")
    assert store.find_golden() == packaged
    checkout = _golden_set(places["checkout"] / "golden")
    assert store.find_golden() == checkout
    _golden_set(places["cwd"] / "golden")
    assert store.find_golden() == "golden"
    env = _golden_set(places["env"])
    monkeypatch.setenv(store.GOLDEN_ENV, env)
    assert store.find_golden() == env
    assert store.find_golden("explicit") == "explicit"
    assert [label for label, _ in store.golden_search_path()] == \
        ["$REFNORM_GOLDEN", "./golden", "the checkout's golden/", "the packaged copy"]


def test_a_set_refnorm_golden_is_used_as_given(places, monkeypatch, capsys):
    """A wrong $REFNORM_GOLDEN is an error, never a silent fallback to another set."""
    _golden_set(places["cwd"] / "golden")
    monkeypatch.setenv(store.GOLDEN_ENV, str(places["env"]))
    assert store.find_golden() == str(places["env"])
    assert main(["check", "--backend", "numpy", "--no-progress"]) == 2
    assert str(places["env"]) in capsys.readouterr().err


def test_no_golden_set_says_where_it_looked_and_how_to_get_one(places, monkeypatch, capsys):
    with pytest.raises(GoldenError) as e:
        store.find_golden()
    msg = str(e.value)
    for where in ("$REFNORM_GOLDEN (not set)", f"./golden ({places['cwd'] / 'golden'}: no MANIFEST.json)",
                  f"the checkout's golden/ ({places['checkout'] / 'golden'}: no MANIFEST.json)",
                  f"the packaged copy ({places['data'] / 'golden'}: no MANIFEST.json)",
                  "refnorm golden build DIR", "--golden DIR"):
        assert where in msg, (where, msg)
    monkeypatch.setattr(store, "checkout_dir", lambda: None)
    assert main(["check", "--backend", "numpy", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no golden set found" in err and "the checkout's golden/ (refnorm is not run from a checkout)" in err


def test_expect_failures_names_a_known_failures_list(places, monkeypatch):
    (places["data"] / "known_failures").mkdir()
    (places["data"] / "known_failures" / "torch-cpu.txt").write_text("")
    (places["data"] / "known_failures" / "jax.txt").write_text("")
    (places["checkout"] / "known_failures").mkdir()
    (places["checkout"] / "known_failures" / "jax.txt").write_text("")
    packaged, checkout = places["data"] / "known_failures", places["checkout"] / "known_failures"
    assert store.find_expected_failures("torch-cpu") == str(packaged / "torch-cpu.txt")
    assert store.find_expected_failures("torch-cpu.txt") == str(packaged / "torch-cpu.txt")
    assert store.find_expected_failures("jax") == str(checkout / "jax.txt"), "the checkout's list first"
    (places["cwd"] / "jax").write_text("")
    assert store.find_expected_failures("jax") == "jax", "an existing file is taken as given"
    for bad in ("nope", "elsewhere/torch-cpu.txt"):
        with pytest.raises(GoldenError, match="not the name of a known-failures list .jax, torch-cpu."):
            store.find_expected_failures(bad)


def test_the_docs_state_the_lookup_order_of_the_code():
    """Every paragraph of README.md and docs/*.md naming the default golden locations names them in the
    code's order (docs/check.md, "Options", states it)."""
    order = ["`$REFNORM_GOLDEN`", "`./golden`", "the checkout's", "packaged"]
    found = 0
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        text = Path(path).read_text(encoding="utf-8")
        for para in re.split(r"\n\s*\n", text):
            if "`$REFNORM_GOLDEN`" in para and "`./golden`" in para:
                found += 1
                at = [para.find(w) for w in order]
                assert -1 not in at and at == sorted(at), f"{path} lists the golden lookup out of order:\n{para}"
    assert found, "neither README.md nor docs/ states where the default golden set is looked up"
