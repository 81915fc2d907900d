"""The optional compiled kernels (refnorm/norms/_fused.c) and the packaged data; everything else is in
pyproject.toml.

optional=True: without a C compiler the install still succeeds and refnorm runs its NumPy path,
which gives the same bits (docs/performance.md). -ffp-contract=off: no fused multiply-add, so every
operation rounds as NumPy's does.

refnorm/check/_reuse.c (the streaming judge's temporaries reused, no values involved) needs NumPy's
headers: numpy is a build requirement (pyproject.toml).

The data: build_py copies the golden set (golden/MANIFEST.json and exactly the files it lists, each
checked against its sha256) and known_failures/*.txt into the built package as refnorm/_data/golden and
refnorm/_data/known_failures, so a wheel carries them (refnorm.golden.store.find_golden and
find_expected_failures find them there; every read still checks every hash). The top-level golden/ and
known_failures/ stay the source of truth; MANIFEST.in puts them in the sdist, so a wheel built from the
sdist has them too. An editable install copies nothing: it reads the checkout's directories.
"""
import functools
import hashlib
import json
import os
import re
import shutil

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.errors import SetupError

HERE = os.path.dirname(os.path.abspath(__file__))
_CASE_FILE = re.compile(r"^[a-z][a-z0-9_]*/[A-Za-z0-9][A-Za-z0-9_.+-]*\.npz$")


@functools.lru_cache(maxsize=None)
def _data_files():
    """[(source path, path under refnorm/_data)]: the golden set as its manifest lists it, each file's
    sha256 checked (a corrupted or half-rebuilt set fails the build instead of shipping), and the
    known-failure lists."""
    golden = os.path.join(HERE, "golden")
    manifest = os.path.join(golden, "MANIFEST.json")
    if not os.path.isfile(manifest):
        raise SetupError(f"{manifest} is missing: run `refnorm golden build golden` before building")
    with open(manifest, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = [(manifest, "golden/MANIFEST.json")]
    for e in cases:
        rel = e["file"]
        if not _CASE_FILE.match(rel):
            raise SetupError(f"{manifest}: case file {rel!r} is not of the form op/name.npz")
        src = os.path.join(golden, *rel.split("/"))
        with open(src, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != e["file_sha256"]:
            raise SetupError(f"golden/{rel}: sha256 differs from golden/MANIFEST.json (run `refnorm golden verify`)")
        out.append((src, "golden/" + rel))
    kf = os.path.join(HERE, "known_failures")
    out += [(os.path.join(kf, n), "known_failures/" + n) for n in sorted(os.listdir(kf)) if n.endswith(".txt")]
    return out


def _numpy_include():
    """NumPy's C headers, for refnorm/check/_reuse.c (none without NumPy: that extension is then skipped)."""
    try:
        import numpy
    except ImportError:
        return []
    return [numpy.get_include()]


class build_py_with_data(build_py):
    """build_py, plus the golden set and known-failure lists as refnorm/_data/ (not in editable mode)."""

    def _data_dir(self):
        return os.path.join(self.build_lib, "refnorm", "_data")

    def run(self):
        super().run()
        if self.editable_mode:
            return
        shutil.rmtree(self._data_dir(), ignore_errors=True)      # nothing stale from an earlier build
        for src, rel in _data_files():
            dst = os.path.join(self._data_dir(), *rel.split("/"))
            self.mkpath(os.path.dirname(dst))
            self.copy_file(src, dst, preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if self.editable_mode:
            return outputs
        return outputs + [os.path.join(self._data_dir(), *rel.split("/")) for _, rel in _data_files()]


setup(cmdclass={"build_py": build_py_with_data}, ext_modules=[Extension(
    "refnorm.norms._fused", ["refnorm/norms/_fused.c"],
    depends=["refnorm/norms/_fused_kernels.h", "refnorm/norms/_fused_api.h"],
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math"],
    optional=True,
), Extension(
    "refnorm.check._judge", ["refnorm/check/_judge.c"], depends=["refnorm/norms/_fused_api.h"],
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math"],
    optional=True,
), Extension(   # a NumPy memory handler (NumPy's headers: pyproject's build requirements)
    "refnorm.check._reuse", ["refnorm/check/_reuse.c"], include_dirs=_numpy_include(),
    extra_compile_args=["-O2", "-std=gnu11"], optional=True,
)])
