"""What the commands of the command line share: the usage error (``CLIError``, exit status 2), the
parsing of KEY=VALUE, .npy and shape arguments, the default golden set, the checks of --ops/--dtypes and
of the files a command will write, and the atomic write (a temporary file and a rename)."""
from __future__ import annotations

import os
import tempfile

import numpy as np

from .. import registry
from ..errors import RefnormError


class CLIError(RefnormError):
    pass


def _pairs(items, what):
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise CLIError(f"{what} {item!r}: expected KEY=VALUE")
        if key in out:
            raise CLIError(f"{what} {key!r} given twice")
        out[key] = value
    return out


def _load_npy(path, what):
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CLIError(f"{what}: file {path!r} does not exist") from None
    except (ValueError, OSError) as e:
        raise CLIError(f"{what}: cannot read {path!r} as a .npy array without pickles: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise CLIError(f"{what}: {path!r} is an archive, expected a single .npy array")
    return arr


def _shape(text, what):
    try:
        shape = tuple(int(s) for s in text.split(",") if s.strip() != "")
    except ValueError:
        raise CLIError(f"{what}: shape {text!r} must be comma-separated integers, e.g. 4,8") from None
    if any(s < 0 for s in shape):
        raise CLIError(f"{what}: shape {text!r} has a negative size")
    return shape


def default_golden_dir() -> str:
    """The golden set to use when none is named: $REFNORM_GOLDEN, else ./golden, else the checkout's
    golden/, else the copy packaged in the wheel (refnorm.golden.store.find_golden)."""
    from ..golden import store
    return store.find_golden()


def _check_ops_dtypes(args):
    """--ops and --dtypes name known normalizers and dtypes, or it is a usage error naming the choices."""
    from ..check.precision import DTYPES
    for op in args.ops or ():
        if op not in registry.names():
            raise CLIError(f"--ops {op!r}: unknown normalizer; expected one of: {', '.join(registry.names())}")
    for dt in args.dtypes or ():
        if dt not in DTYPES:
            raise CLIError(f"--dtypes {dt!r}: expected one of: {', '.join(DTYPES)}")


def _check_writable(path, flag="--json"):
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise CLIError(f"{flag} {path!r}: directory {d!r} does not exist")
    if os.path.isdir(path):
        raise CLIError(f"{flag} {path!r} is a directory, expected a file name")


def _check_report_dir(path):
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"--report {path!r} is a file, expected a directory (created if missing)")
    if not os.path.isdir(parent):
        raise CLIError(f"--report {path!r}: directory {parent!r} does not exist")


def _write_atomically(path, data, suffix=".tmp"):
    """Write ``data`` (bytes, or a function writing to a binary file) to ``path`` through a temporary
    file in the same directory and a rename: an interrupted or failed write leaves no partial file.
    The file gets the mode a plain open() would give it (0666 & ~umask), not mkstemp's 0600."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".refnorm-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            if callable(data):
                data(f)
            else:
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
