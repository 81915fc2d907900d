"""Writing and safely reading the golden set: one .npz per case plus ``MANIFEST.json``.

Layout: ``<dir>/MANIFEST.json`` and ``<dir>/<op>/<name>.npz`` for case id ``<op>/<name>``. Nothing
else belongs in the directory (verify reports any other file, and any symlink, as a failure).

MANIFEST.json (``FORMAT``): the generator's versions (refnorm, numpy, ml_dtypes, python) and one entry
per case: ``id``, ``file``, ``file_bytes`` and ``file_sha256`` (the .npz as written), ``arrays``
(name -> ``shape``, ``dtype``, ``sha256`` of the array's C-order little-endian bytes, and
``value_dtype: "bfloat16"`` for bfloat16 values stored as float32), ``case`` (the table row) and
``steps`` (per step: training, the conditioning ``cond``, and what a checker must ``compare``).
The .npz files are written deterministically (fixed zip timestamps, sorted members), so an
unchanged table rebuilds to identical bytes.

Writing is atomic (``write_set``): the new set is written into a temporary directory next to the
target and swapped in with two renames; an exception (or Ctrl-C) before the swap leaves the previous
set untouched and removes the temporary directory.

Reading is defensive (``read_manifest``, ``load_arrays``); every problem is a ``GoldenError``:
* the manifest is size-capped, strict JSON (no NaN, no duplicate keys) and schema-checked; the
  declared sizes are capped before anything is read;
* a case file's path must be exactly ``<id>.npz`` under the golden directory: no absolute paths, no
  ``..``, no symlinks anywhere on the way, opened with O_NOFOLLOW, a regular file;
* the file's size and sha256 are checked before it is parsed;
* inside the zip: exactly the members the manifest lists, no duplicates, no encryption, stored or
  deflated only; each .npy header is parsed (``allow_pickle`` never enters: object dtypes are
  refused by an allow-list of dtypes) and its dtype, shape and byte count checked against the
  manifest before the data is read; exactly that many bytes are read (a lying zip size cannot
  inflate beyond it), then the array's sha256 is checked before the array is returned.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import platform
import re
import shutil
import stat
import tempfile
import zipfile

import numpy as np

from ..errors import RefnormError

FORMAT = "refnorm-golden/1"
MANIFEST = "MANIFEST.json"
DTYPES = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "int64": "<i8"}
MAX_MANIFEST_BYTES = 32 << 20
MAX_FILE_BYTES = 64 << 20
MAX_ARRAY_BYTES = 64 << 20
MAX_TOTAL_BYTES = 512 << 20
MAX_NDIM = 8
_HEX = re.compile(r"^[0-9a-f]{64}$")
_ID = re.compile(r"^[a-z][a-z0-9_]*/[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_ARRAY = re.compile(r"^(init|step[0-9]{1,4})\.(input|cotangent|output|grad|state)\.[A-Za-z_][A-Za-z0-9_]*$")
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class GoldenError(RefnormError):
    """A golden set that cannot be trusted: missing, corrupted, truncated, tampered or hostile files,
    or a set that no longer matches the case table."""


def array_sha256(arr: np.ndarray) -> str:
    """sha256 of the array's C-order bytes in little-endian byte order (shape and dtype are
    recorded, and checked, separately)."""
    arr = np.asarray(arr).copy(order="C")  # (ascontiguousarray would turn a 0-d array into 1-d)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return hashlib.sha256(arr.tobytes()).hexdigest()


def generator_info() -> dict:
    import ml_dtypes

    import refnorm
    return {"refnorm": refnorm.__version__, "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__,
            "python": platform.python_version()}


# ------------------------------------------------------------------------------------- writing
def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", allowZip64=True) as zf:
        for name in sorted(arrays):
            arr = np.asarray(arrays[name]).copy(order="C")
            if arr.dtype.str not in DTYPES.values():
                raise GoldenError(f"array {name!r} has dtype {arr.dtype}; expected one of {', '.join(DTYPES)}")
            npy = io.BytesIO()
            np.lib.format.write_array(npy, arr, version=(1, 0), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, npy.getvalue(), compresslevel=6)
    return buf.getvalue()


def _entry(case_id: str, arrays: dict, value_dtypes: dict, data: bytes, meta: dict) -> dict:
    arr_meta = {}
    for name in sorted(arrays):
        a = arrays[name]
        d = {"shape": list(a.shape), "dtype": a.dtype.name, "sha256": array_sha256(a)}
        if name in value_dtypes:
            d["value_dtype"] = value_dtypes[name]
        arr_meta[name] = d
    return {"id": case_id, "file": case_id + ".npz", "file_bytes": len(data),
            "file_sha256": hashlib.sha256(data).hexdigest(), "arrays": arr_meta, **meta}


def _manifest_text(manifest: dict) -> str:
    """JSON with one line per case field and per array: compact, and diffs stay readable."""
    def dump(v):
        return json.dumps(v, allow_nan=False)
    cases = []
    for e in manifest["cases"]:
        head = ",\n ".join(f"{dump(k)}: {dump(v)}" for k, v in e.items() if k != "arrays")
        arrays = ",\n  ".join(f"{dump(k)}: {dump(v)}" for k, v in e["arrays"].items())
        cases.append(f"{{{head},\n \"arrays\": {{\n  {arrays}}}}}")
    text = (f'{{"format": {dump(manifest["format"])},\n"generator": {dump(manifest["generator"])},\n'
            f'"cases": [\n' + ",\n".join(cases) + "\n]}\n")
    assert json.loads(text) == json.loads(json.dumps(manifest))
    return text


def _write_file(path: str, data: bytes) -> None:
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_target(target: str) -> None:
    if os.path.islink(target):
        raise GoldenError(f"golden directory {target!r} is a symlink; give the real path")
    if os.path.exists(target):
        if not os.path.isdir(target):
            raise GoldenError(f"golden directory {target!r} exists and is not a directory")
        if os.listdir(target) and not os.path.isfile(os.path.join(target, MANIFEST)):
            raise GoldenError(f"refusing to replace {target!r}: it is not empty and holds no {MANIFEST} "
                              "(not a golden set)")


def write_set(directory, items, *, log=None) -> dict:
    """Write a golden set atomically; return {"cases", "bytes"}.

    ``items`` yields (case_id, arrays, value_dtypes, meta) and may raise at any point: the previous
    set at ``directory`` is then left exactly as it was, and the temporary directory is removed.
    """
    target = os.path.abspath(os.fspath(directory))
    _check_target(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.build-", dir=parent)
    old = None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)       # mkdtemp makes it 0700; the set is an ordinary directory
        entries, total = [], 0
        for case_id, arrays, value_dtypes, meta in items:
            if not _ID.match(case_id):
                raise GoldenError(f"case id {case_id!r} is not of the form op/name")
            data = _npz_bytes(arrays)
            os.makedirs(os.path.join(tmp, case_id.split("/")[0]), exist_ok=True)
            _write_file(os.path.join(tmp, case_id + ".npz"), data)
            entries.append(_entry(case_id, arrays, value_dtypes, data, meta))
            total += len(data)
            if log:
                log(f"  {case_id}  {len(data) / 1024:.0f} KiB")
        text = _manifest_text({"format": FORMAT, "generator": generator_info(), "cases": entries})
        _write_file(os.path.join(tmp, MANIFEST), text.encode())
        for sub in {e["id"].split("/")[0] for e in entries}:
            _fsync_dir(os.path.join(tmp, sub))
        _fsync_dir(tmp)
        # the swap: the previous set moves aside, the new one takes its name, the old one is removed
        if os.path.exists(target):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old-", dir=parent)
            os.rename(target, os.path.join(old, "set"))
        try:
            os.rename(tmp, target)
        except BaseException:
            if old:
                os.rename(os.path.join(old, "set"), target)
            raise
        tmp = None
        _fsync_dir(parent)
        return {"cases": len(entries), "bytes": total + len(text)}
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and os.path.exists(target):
            shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------------------------- reading
def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise GoldenError(f"{MANIFEST}: key {k!r} appears twice")
        d[k] = v
    return d


def _bad_constant(name):
    raise GoldenError(f"{MANIFEST}: {name} is not valid JSON here")


def _require(cond, msg):
    if not cond:
        raise GoldenError(f"{MANIFEST}: {msg}")


def _check_array_meta(case_id, name, m) -> int:
    where = f"case {case_id!r} array {name!r}"
    _require(isinstance(name, str) and _ARRAY.match(name), f"case {case_id!r}: bad array name {name!r}")
    _require(isinstance(m, dict) and {"shape", "dtype", "sha256"} <= set(m)
             and set(m) <= {"shape", "dtype", "sha256", "value_dtype"}, f"{where}: expected shape, dtype, sha256")
    shape = m["shape"]
    _require(isinstance(shape, list) and len(shape) <= MAX_NDIM
             and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s for s in shape),
             f"{where}: shape {shape!r} must be a list of at most {MAX_NDIM} non-negative ints")
    _require(m["dtype"] in DTYPES, f"{where}: dtype {m['dtype']!r} is not one of {', '.join(DTYPES)}")
    _require(m.get("value_dtype", "bfloat16") == "bfloat16" and (m.get("value_dtype") is None
                                                                  or m["dtype"] == "float32"),
             f"{where}: value_dtype {m.get('value_dtype')!r}: only bfloat16 stored as float32 is known")
    _require(isinstance(m["sha256"], str) and _HEX.match(m["sha256"]), f"{where}: sha256 is not 64 hex digits")
    nbytes = math.prod(shape) * np.dtype(DTYPES[m["dtype"]]).itemsize
    _require(nbytes <= MAX_ARRAY_BYTES, f"{where}: {nbytes} bytes exceeds the limit of {MAX_ARRAY_BYTES}")
    return nbytes


def validate_manifest(man) -> dict:
    """Check the manifest's structure and declared sizes; return it."""
    _require(isinstance(man, dict), "expected a JSON object")
    _require(man.get("format") == FORMAT, f"format {man.get('format')!r}; expected {FORMAT!r}")
    _require(isinstance(man.get("generator"), dict), "missing 'generator'")
    cases = man.get("cases")
    _require(isinstance(cases, list), "'cases' must be a list")
    seen, total = set(), 0
    for e in cases:
        _require(isinstance(e, dict) and isinstance(e.get("id"), str), "each case needs an 'id'")
        cid = e["id"]
        _require(_ID.match(cid) is not None, f"case id {cid!r} is not of the form op/name")
        _require(cid not in seen, f"case {cid!r} listed twice")
        seen.add(cid)
        _require(e.get("file") == cid + ".npz", f"case {cid!r}: file {e.get('file')!r}; expected {cid + '.npz'!r}")
        fb = e.get("file_bytes")
        _require(isinstance(fb, int) and not isinstance(fb, bool) and 0 < fb <= MAX_FILE_BYTES,
                 f"case {cid!r}: file_bytes {fb!r} must be an int in (0, {MAX_FILE_BYTES}]")
        _require(isinstance(e.get("file_sha256"), str) and _HEX.match(e["file_sha256"]),
                 f"case {cid!r}: file_sha256 is not 64 hex digits")
        arrays = e.get("arrays")
        _require(isinstance(arrays, dict) and arrays, f"case {cid!r}: 'arrays' must be a non-empty object")
        total += sum(_check_array_meta(cid, k, v) for k, v in arrays.items())
        _require(isinstance(e.get("case"), dict) and isinstance(e.get("steps"), list), f"case {cid!r}: "
                 "missing 'case' or 'steps'")
    _require(total <= MAX_TOTAL_BYTES, f"declares {total} bytes of arrays, over the limit of {MAX_TOTAL_BYTES}")
    return man


_VALIDATED: dict[bytes, None] = {}   # sha256 digests of manifests this process has validated (latest 8)


def read_manifest(directory) -> dict:
    """The validated manifest of the golden set at ``directory`` (a new object each call).

    Bytes this process has validated before (the same sha256) are parsed without validating again: one
    ``refnorm check`` or test session reads the manifest once per case it runs."""
    path = os.path.join(os.fspath(directory), MANIFEST)
    data = _read_regular(os.path.realpath(os.fspath(directory)), [MANIFEST], MAX_MANIFEST_BYTES, MANIFEST)
    digest = hashlib.sha256(data).digest()
    if digest in _VALIDATED:
        return json.loads(data.decode("utf-8"))
    try:
        man = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_bad_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GoldenError(f"{path}: not valid UTF-8 JSON: {e}") from None
    man = validate_manifest(man)
    _VALIDATED[digest] = None
    while len(_VALIDATED) > 8:
        del _VALIDATED[next(iter(_VALIDATED))]
    return man


def _read_regular(root: str, parts: list[str], limit: int, what: str) -> bytes:
    """Read ``root/parts...``: every component a plain name, no symlinks, a regular file <= limit."""
    cur = root
    for i, p in enumerate(parts):
        if p in ("", ".", "..") or "/" in p or "\\" in p or "\0" in p:
            raise GoldenError(f"{what}: path component {p!r} is not allowed")
        cur = os.path.join(cur, p)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            raise GoldenError(f"{what}: {cur} does not exist") from None
        if stat.S_ISLNK(st.st_mode):
            raise GoldenError(f"{what}: {cur} is a symlink; the golden set holds no symlinks")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise GoldenError(f"{what}: {cur} is not a directory")
    real = os.path.realpath(cur)
    if os.path.commonpath([real, root]) != root:
        raise GoldenError(f"{what}: {cur} resolves outside the golden directory {root}")
    try:
        fd = os.open(cur, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        raise GoldenError(f"{what}: cannot open {cur}: {e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GoldenError(f"{what}: {cur} is not a regular file")
        if st.st_size > limit:
            raise GoldenError(f"{what}: {cur} has {st.st_size} bytes, over the limit of {limit}")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise GoldenError(f"{what}: {cur} grew past the limit of {limit} bytes while being read")
    return data


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, m: dict, where: str) -> np.ndarray:
    if info.flag_bits & 0x1:
        raise GoldenError(f"{where}: encrypted zip member")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise GoldenError(f"{where}: zip compression method {info.compress_type} is not allowed")
    want_dtype = np.dtype(DTYPES[m["dtype"]])
    want_shape = tuple(m["shape"])
    nbytes = math.prod(want_shape) * want_dtype.itemsize
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=4096)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=4096)
            else:
                raise GoldenError(f"{where}: .npy format version {version} is not supported")
            if dtype.hasobject or dtype.str != want_dtype.str:
                raise GoldenError(f"{where}: .npy header has dtype {dtype.str!r}; the manifest says "
                                  f"{m['dtype']} ({want_dtype.str!r}); object arrays (pickles) are never loaded")
            if tuple(shape) != want_shape or fortran:
                raise GoldenError(f"{where}: .npy header has shape {tuple(shape)} (fortran_order={fortran}); "
                                  f"the manifest says {want_shape}")
            header_end = f.tell()
            if info.file_size != header_end + nbytes:
                raise GoldenError(f"{where}: member holds {info.file_size - header_end} data bytes; "
                                  f"shape {want_shape} {m['dtype']} needs {nbytes}")
            data = f.read(nbytes)
            if len(data) != nbytes or f.read(1):
                raise GoldenError(f"{where}: member is truncated or has trailing bytes")
    except GoldenError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError) as e:
        raise GoldenError(f"{where}: unreadable .npy member: {type(e).__name__}: {e}") from None
    if hashlib.sha256(data).hexdigest() != m["sha256"]:
        raise GoldenError(f"{where}: sha256 of the array differs from the manifest (tampered or corrupted)")
    return np.frombuffer(data, dtype=want_dtype).reshape(want_shape)


def load_arrays(directory, entry: dict) -> dict[str, np.ndarray]:
    """Every array of one manifest ``entry``, each checked (see the module docstring).

    Returned arrays are read-only views of the verified bytes.
    """
    root = os.path.realpath(os.fspath(directory))
    cid = entry["id"]
    where = f"golden case {cid!r}"
    data = _read_regular(root, entry["file"].split("/"), MAX_FILE_BYTES, where)
    if len(data) != entry["file_bytes"]:
        raise GoldenError(f"{where}: {entry['file']} has {len(data)} bytes; the manifest says "
                          f"{entry['file_bytes']} (truncated or replaced)")
    if hashlib.sha256(data).hexdigest() != entry["file_sha256"]:
        raise GoldenError(f"{where}: sha256 of {entry['file']} differs from the manifest (tampered or corrupted)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as e:
        raise GoldenError(f"{where}: {entry['file']} is not a readable zip: {e}") from None
    names = [i.filename for i in infos]
    want = {k + ".npy" for k in entry["arrays"]}
    if len(names) != len(set(names)):
        raise GoldenError(f"{where}: zip lists a member twice")
    if set(names) != want:
        extra, missing = sorted(set(names) - want), sorted(want - set(names))
        raise GoldenError(f"{where}: zip members differ from the manifest: unexpected {extra}, missing {missing}")
    out = {}
    with zf:
        for info in infos:
            name = info.filename[:-4]
            out[name] = _read_member(zf, info, entry["arrays"][name], f"{where}: array {name!r}")
    return out


def scan(directory, manifest: dict) -> list[str]:
    """Problems with the directory itself: files the manifest does not list, and symlinks."""
    root = os.path.realpath(os.fspath(directory))
    listed = {MANIFEST} | {e["file"] for e in manifest["cases"]}
    problems = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if os.path.islink(full):
                problems.append(f"{rel}: symlink inside the golden directory")
            elif name in filenames and rel not in listed:
                problems.append(f"{rel}: file not listed in {MANIFEST} (stale or planted; rebuild or remove it)")
    return sorted(problems)


# ------------------------------------------------------------------------------------- locating
# Where the default golden set and a named known-failures list are found. The checkout's golden/ and
# known_failures/ are the source of truth; a wheel carries a copy of both in refnorm/_data/ (setup.py's
# build_py copies them at build time), read through the same checks as any other set.
GOLDEN_ENV = "REFNORM_GOLDEN"


def package_data_dir() -> str:
    """``refnorm/_data`` of the running refnorm: the packaged copies (present in a wheel install)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_data")


def checkout_dir() -> str | None:
    """The source checkout the running refnorm is imported from (an editable install or PYTHONPATH),
    or None when refnorm is installed (its parent directory holds no pyproject.toml)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.isfile(os.path.join(root, "pyproject.toml")) else None


def golden_search_path() -> list[tuple[str, str | None]]:
    """Where the default golden set is looked for, in order, as (label, directory or None):
    ``$REFNORM_GOLDEN``, ``./golden``, the checkout's ``golden/``, the packaged copy."""
    root = checkout_dir()
    return [(f"${GOLDEN_ENV}", os.environ.get(GOLDEN_ENV) or None),
            ("./golden", "golden"),
            ("the checkout's golden/", os.path.join(root, "golden") if root else None),
            ("the packaged copy", os.path.join(package_data_dir(), "golden"))]


def find_golden(explicit=None) -> str:
    """The golden set to use: ``explicit`` (``--golden DIR``) if given, else ``$REFNORM_GOLDEN`` if set
    (used as given: a wrong value is an error, never a silent fallback), else the first of ``./golden``,
    the checkout's ``golden/`` and the packaged copy that holds a MANIFEST.json. Raises GoldenError
    saying where it looked and how to get a set."""
    if explicit:
        return os.fspath(explicit)
    (env_label, env), *rest = golden_search_path()
    if env:
        return env
    looked = [f"{env_label} (not set)"]
    for label, d in rest:
        if d is None:
            looked.append(f"{label} (refnorm is not run from a checkout)")
        elif os.path.isfile(os.path.join(d, MANIFEST)):
            return d
        else:
            looked.append(f"{label} ({os.path.abspath(d)}: no {MANIFEST})")
    raise GoldenError("no golden set found; looked in: " + "; ".join(looked) + ". Pass --golden DIR, set "
                      f"{GOLDEN_ENV}=DIR, or build one: `refnorm golden build DIR` regenerates it from the case "
                      "table in a few seconds (a wheel of refnorm ships one in refnorm/_data/golden)")


def known_failure_lists() -> dict[str, str]:
    """The known-failures lists found by bare name: {name: path}, the checkout's known_failures/*.txt
    over the packaged copies."""
    out = {}
    root = checkout_dir()
    for d in ([os.path.join(root, "known_failures")] if root else []) + [os.path.join(package_data_dir(),
                                                                                      "known_failures")]:
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".txt"):
                    out.setdefault(f[:-4], os.path.join(d, f))
    return out


def find_expected_failures(name) -> str:
    """The file ``--expect-failures NAME`` means: NAME itself if that file exists, else, for a bare
    name such as ``torch-cpu`` (or ``torch-cpu.txt``), the checkout's ``known_failures/torch-cpu.txt``,
    else the packaged copy of it. Raises GoldenError naming the known lists otherwise."""
    name = os.fspath(name)
    if os.path.exists(name):
        return name
    base = name[:-4] if name.endswith(".txt") else name
    lists = known_failure_lists()
    if os.sep not in name and "/" not in name and base in lists:
        return lists[base]
    raise GoldenError(f"expected-failures file {name!r} does not exist, and it is not the name of a "
                      f"known-failures list ({', '.join(lists) or 'none found'})")
