"""The golden set: the checked-in set verifies, the table covers issue 5's regimes, builds are atomic
and reproducible, and every corrupted, truncated, tampered or hostile file is a GoldenError, never a pass."""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import refnorm
from refnorm import golden
from refnorm.golden import build as B
from refnorm.golden import cases as C
from refnorm.golden import commands as golden_commands
from refnorm.golden import store
from refnorm.golden.commands import build
from refnorm.golden.store import GoldenError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED_IN = os.path.join(ROOT, "golden")
BUDGET_BYTES = 36 * 2**20      # 30 MiB until issue 36 added five ops (gated, DyT, PolyNorm, GN+SiLU, block quant)


def _implemented_ops():
    return [n for n in refnorm.names() if importlib.util.find_spec(f"refnorm.norms.{n}") is not None]


# ---------------------------------------------------------------------------- the checked-in set
def test_checked_in_set_verifies():
    assert os.path.isfile(os.path.join(CHECKED_IN, store.MANIFEST)), \
        "golden/MANIFEST.json is missing: run `refnorm golden build` (refnorm.golden.commands.build('golden'))"
    report = golden.verify(CHECKED_IN)
    print(report.summary())
    assert report.ok, report.summary()
    assert report.cases == len(golden.CASES)
    assert report.seconds < 60


def test_checked_in_set_is_within_budget():
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(CHECKED_IN) for f in fs)
    assert total < BUDGET_BYTES, f"golden/ holds {total / 2**20:.1f} MiB; the budget is {BUDGET_BYTES / 2**20:g} MiB"


def test_loaded_case_matches_evaluate_on_its_case_dtype_inputs():
    """What a checker sees: inputs in the case dtype, and refnorm on them gives the stored values: bit for bit on
    the machine that built the set, and within verify's tolerance (2e-13 * (1 + cond) of the array's scale) on
    any other, where numpy's float64 tanh, exp and cosh may differ in the last bit (AVX512 machines use SVML)."""
    man = store.read_manifest(CHECKED_IN)
    first = {}
    for e in man["cases"]:     # one case per (op, dtype), multi-step ones first
        key = (e["case"]["op"], e["case"]["dtype"])
        if key not in first or len(e["steps"]) > len(first[key]["steps"]):
            first[key] = e
    for (op, dtype), e in sorted(first.items()):
        cid = e["id"]
        case = golden.load_case(CHECKED_IN, cid, manifest=man)
        state = {k: v for k, v in case.init_state.items()}
        for i, step in enumerate(case.steps):
            want_dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
            assert all(v.dtype == want_dt for v in step.inputs.values())
            r = refnorm.evaluate(case.op, step.inputs, config=case.config, grad_outputs=step.cotangents,
                                 state=state, training=step.training)
            cond = float(e["steps"][i].get("cond", 0.0))
            for kind, got, want in (("outputs", r.outputs, step.outputs), ("grads", r.grads, step.grads),
                                    ("state", r.state, step.state)):
                for k in step.compare[kind]:
                    problem, _, _ = golden_commands._compare(k, np.asarray(got[k]), want[k], cond, exact=False)
                    assert problem is None, f"{cid} step {i} {kind}: {problem}"
            state = dict(r.state)


# ------------------------------------------------------------------------------------- coverage
def test_every_implemented_normalizer_has_golden_cases():
    have = {c.op for c in golden.CASES}
    missing = [n for n in _implemented_ops() if n not in have]
    assert not missing, f"normalizers without golden cases (add rows to refnorm/golden/cases.py): {missing}"


NO_BIG_REDUCTION = {
    "local_response_norm": "its sums run over a window of `size` channels, not over a long axis",
    **{op: "an offline framework instance: its batch statistics are the same two-pass sums over rows as "
           "batch_norm's / unified_norm's, which have 65536-value cases; no backend runs it, and such a case "
           "costs ~0.7 MB of the golden budget" for op in ("offline_batch_norm", "power_norm", "batch_renorm")},
    "norm_quant": "its statistics are layer_norm's and rms_norm's (their 65536-value cases check those sums); its "
                  "float64 q of 65536 values would cost ~0.5 MB: the production suite's recipes run long rows",
    **{op: "its reduction is layer_norm's (rms_norm's) own, which have 65536-value cases; the residual add and "
           "the per-sample affine are element-wise, and such a case (inputs, two cotangents, two outputs, four "
           "gradients) costs ~2 MB of the golden budget" for op in ("add_norm", "adaptive_layer_norm")},
    "gated_norm": "its reduction is rms_norm's (layer_norm's) own per group, which have 65536-value cases; the gate "
                  "is element-wise, and such a case (x, z, the cotangent, y and four gradients) costs ~4 MB of the "
                  "golden budget: the production suite's recipes run rows of 5120 and 8192",
    "dyt": "element-wise: nothing is reduced along an axis; its one reduction, alpha's gradient over every element of "
           "x, has a case of 65536 terms (dyt/normal_f32_128x512)",
    "norm_quant_block": "its statistics are layer_norm's and rms_norm's (their 65536-value cases check those sums), "
                        "its blocks at most 128 values; the production suite's recipes run long rows",
}


@pytest.mark.parametrize("op", sorted({c.op for c in golden.CASES}))
def test_coverage_per_normalizer(op):
    rows = [c for c in golden.CASES if c.op == op]
    spec = refnorm.get(op)
    assert {c.dtype for c in rows} == set(C.DTYPES), f"{op}: every dtype"
    regimes = {c.regime for c in rows}
    need = {"normal", "mean1e3", "mean1e4", "const", "std1e-3", "one_std1e-3", "sq_overflow", "heavy_tail"}
    assert need <= regimes, f"{op}: regimes missing: {need - regimes}"
    assert any(c.regime == "sq_overflow" and c.dtype == "float16" for c in rows), f"{op}: x^2 overflows float16"
    sizes = [math.prod(s) for c in rows for s in c.inputs.values()]
    reductions = [math.prod((c.view or next(iter(c.inputs.values())))[a] for a in c.axes)
                  for c in rows if c.axes is not None]
    if op not in NO_BIG_REDUCTION:
        assert max(reductions) >= 65536, f"{op}: a reduction of 65536+ values"
        assert any(n & (n - 1) for n in reductions) and any(n & (n - 1) == 0 for n in reductions), \
            f"{op}: power-of-two and non-power-of-two reductions"
    assert max(sizes) <= 2**18, f"{op}: keep cases small (budget)"
    if "eps" in spec.options:
        eps = {c.config.get("eps") for c in rows}
        assert {1e-12, 0.3} <= eps, f"{op}: eps from 1e-12 to 0.3"
    for opt in ("weight", "bias"):
        if opt in spec.inputs and opt not in spec.required:
            assert any(opt not in c.inputs for c in rows), f"{op}: a case without {opt}"
            assert any(opt in c.inputs for c in rows)
    if spec.state:
        assert any(len(c.steps) >= 3 and c.state for c in rows), f"{op}: multi-step running statistics"
        assert any("eval" in c.steps for c in rows), f"{op}: eval mode"
    if op in ("batch_norm", "group_norm", "instance_norm", "group_norm_silu"):
        ndims = {len(c.inputs["x"]) for c in rows}
        assert {4, 5} <= ndims, f"{op}: 4-D and 5-D inputs"
    assert any(c.inputs[next(iter(c.inputs))][0] == 1 for c in rows), f"{op}: batch size 1"


def _add_norm_features(c):
    """Every feature of an add_norm case but dropout, its dtype, regimes and shape."""
    cfg = c.config
    return (cfg["norm"], tuple(sorted(k for k in ("weight", "bias") if k in c.inputs)), "rowscale" in c.inputs,
            bool(cfg["residual_in_fp32"]), bool(cfg["prenorm"]), float(cfg["weight_offset"]) != 0.0,
            "x1" in c.inputs, "weight1" in c.inputs, "bias1" in c.inputs, "residual" in c.inputs)


def test_every_add_norm_feature_combination_with_dropout_is_also_without_it():
    """A kernel without dropout is judged on every combination of the other features the dropout cases
    have (rowscale, prenorm, the parallel branch, rms or layer norm, residual_in_fp32, the weight offset)."""
    rows = [c for c in golden.CASES if c.op == "add_norm"]
    plain = {_add_norm_features(c) for c in rows if c.config["dropout_p"] == 0}
    dropped = [c for c in rows if c.config["dropout_p"] > 0]
    assert dropped and plain
    missing = [c.id for c in dropped if _add_norm_features(c) not in plain]
    assert not missing, f"add_norm feature combinations only with dropout (add a row without it): {missing}"


def test_case_ids_say_what_they_test():
    for c in golden.CASES:
        assert c.id.startswith(f"{c.op}/{c.regime}_"), c.id
        assert f"_{C.DTYPES[c.dtype]}_" in c.id, c.id
        assert c.to_json()["why"], c.id


# ------------------------------------------------------------------------- a small built set
SMALL = ("layer_norm/mean1e3_f32_6x100", "layer_norm/std1e-3_bf16_6x100",
         "batch_norm/normal_onnx_train3_eval_f16_4x2x3x3", "batch_norm/const_eps1e-12_f16_7x3")


def _small_cases():
    rows = C.by_id()
    return [rows[i] for i in SMALL]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden_src") / "golden"
    build(d, cases=_small_cases())
    return d


@pytest.fixture
def gset(built, tmp_path):
    """A private copy of the small set to damage."""
    d = tmp_path / "golden"
    shutil.copytree(built, d)
    return d


def _manifest(d):
    return json.loads((d / store.MANIFEST).read_text())


def _write_manifest(d, man):
    (d / store.MANIFEST).write_text(json.dumps(man))


def _entry(man, cid):
    return next(e for e in man["cases"] if e["id"] == cid)


def _edit_entry(d, edit, cid=SMALL[0]):
    """Rewrite the manifest with ``edit(entry)`` applied to the entry of ``cid`` (no hash kept in step)."""
    man = _manifest(d)
    edit(_entry(man, cid))
    _write_manifest(d, man)


def _rewrite_zip(d, cid, change):
    """Rewrite a case file through ``change(members: dict name->bytes)``; keep the manifest's file
    size and file hash in step, so only the deeper checks can catch the change."""
    path = d / (cid + ".npz")
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    members = change(members)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members if isinstance(members, list) else members.items():
            zf.writestr(name, data)
    path.write_bytes(buf.getvalue())
    man = _manifest(d)
    e = _entry(man, cid)
    e["file_bytes"], e["file_sha256"] = len(buf.getvalue()), hashlib.sha256(buf.getvalue()).hexdigest()
    _write_manifest(d, man)
    return man


def _npy(arr, allow_pickle=False):
    b = io.BytesIO()
    np.save(b, arr, allow_pickle=allow_pickle)
    return b.getvalue()


def _fails(d, match, cid=SMALL[0]):
    """Both the loader and verify refuse the set, with a message that says why."""
    with pytest.raises(GoldenError, match=match):
        golden.load_case(d, cid)
    report = golden.verify(d, cases=_small_cases())
    assert not report.ok
    assert any(__import__("re").search(match, f) for f in report.failures), report.summary()


def test_small_build_is_exact_and_reproducible(built, tmp_path):
    report = golden.verify(built, cases=_small_cases(), exact=True)
    assert report.ok, report.summary()
    assert report.bit_identical == report.arrays > 0
    again = tmp_path / "again"
    build(again, cases=_small_cases())
    for dirpath, _, files in os.walk(built):
        for f in files:
            a = os.path.join(dirpath, f)
            b = os.path.join(again, os.path.relpath(a, built))
            assert Path(a).read_bytes() == Path(b).read_bytes(), f"{f} differs between two builds"


def test_inputs_are_exactly_representable_and_bf16_is_stored_as_float32(built):
    man = store.read_manifest(built)
    for e in man["cases"]:
        dtype = e["case"]["dtype"]
        arrays = store.load_arrays(built, e)
        for k, a in arrays.items():
            if B.is_drawn(k) and a.dtype.kind == "f":
                assert a.dtype == B.STORAGE[dtype]
                assert B.is_representable(a, dtype), (e["id"], k)
                if dtype == "bfloat16":
                    assert e["arrays"][k]["value_dtype"] == "bfloat16"
                    assert not np.any(a.view(np.uint32) & 0xFFFF), "bf16 values have zero low 16 bits"
            elif not B.is_drawn(k):
                assert a.dtype in (np.float64, np.int64), (e["id"], k)
        # the arrays load with plain NumPy too (portable npz, no pickles)
        with np.load(built / e["file"], allow_pickle=False) as z:
            assert sorted(z.files) == sorted(arrays)


def test_tampered_byte_is_caught_by_the_file_hash(gset):
    p = gset / (SMALL[0] + ".npz")
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    _fails(gset, "sha256 of .* differs from the manifest")


def test_truncated_file(gset):
    p = gset / (SMALL[0] + ".npz")
    p.write_bytes(p.read_bytes()[:-100])
    _fails(gset, "truncated or replaced")


def test_tampered_array_with_a_consistent_file_hash_is_caught_by_the_array_hash(gset):
    def change(m):
        arr = np.load(io.BytesIO(m["step0.output.y.npy"]))
        arr = arr.copy()
        arr.flat[3] = np.nextafter(arr.flat[3], np.inf)      # one ulp, one element
        m["step0.output.y.npy"] = _npy(arr)
        return m
    _rewrite_zip(gset, SMALL[0], change)
    _fails(gset, "sha256 of the array differs")


def test_tampered_expected_value_with_every_hash_updated_is_caught_by_recomputation(gset):
    _replace_array_everywhere(gset, SMALL[0], "step0.grad.x", lambda a: a * (1 + 1e-9))
    golden.load_case(gset, SMALL[0])                       # every hash is consistent now...
    report = golden.verify(gset, cases=_small_cases())     # ...but the reference disagrees
    assert not report.ok and any("step0.grad.x: recomputed differs" in f for f in report.failures), report.summary()


def _replace_array_everywhere(gset, cid, name, change):
    """Change one array of a case and update every hash, as a rebuild on another machine would."""
    man = _rewrite_zip(gset, cid, lambda m: {**m, name + ".npy": _npy(change(np.load(io.BytesIO(m[name + ".npy"]))))})
    e = _entry(man, cid)
    with zipfile.ZipFile(gset / e["file"]) as zf:
        e["arrays"][name]["sha256"] = store.array_sha256(np.load(io.BytesIO(zf.read(name + ".npy"))))
    _write_manifest(gset, man)


def test_one_ulp_difference_is_within_the_float64_tolerance_but_not_bit_exact(gset):
    """What another machine's float64 summation order may produce: accepted by default, refused by exact."""
    def one_ulp(a):
        a = a.copy()
        a.flat[7] = np.nextafter(a.flat[7], np.inf)
        return a
    _replace_array_everywhere(gset, SMALL[0], "step0.output.y", one_ulp)
    report = golden.verify(gset, cases=_small_cases())
    assert report.ok and 0 < report.worst < 1e-2, report.summary()
    assert report.bit_identical == report.arrays - 1
    exact = golden.verify(gset, cases=_small_cases(), exact=True)
    assert not exact.ok and any("step0.output.y: not bit-identical" in f for f in exact.failures)


def test_tampered_input_with_every_hash_updated_is_caught_by_the_redraw(gset):
    _replace_array_everywhere(gset, SMALL[0], "step0.input.x", lambda a: -a)
    report = golden.verify(gset, cases=_small_cases())
    assert not report.ok and any("differs from a fresh draw" in f for f in report.failures), report.summary()


def test_pickle_inside_is_refused(gset):
    obj = np.empty(3, dtype=object)
    obj[:] = [{"a": 1}, None, os.system]
    _rewrite_zip(gset, SMALL[0], lambda m: {**m, "step0.output.y.npy": _npy(obj, allow_pickle=True)})
    _fails(gset, "object arrays .pickles. are never loaded")


def test_manifest_cannot_declare_an_object_dtype(gset):
    _edit_entry(gset, lambda e: e["arrays"]["step0.output.y"].update(dtype="object"))
    with pytest.raises(GoldenError, match="dtype 'object' is not one of"):
        golden.verify(gset, cases=_small_cases())


@pytest.mark.parametrize("bad", ["../evil.npz", "/etc/passwd", "layer_norm/../../evil.npz", "layer_norm\\..\\x.npz"])
def test_path_traversal_in_the_manifest_is_refused(gset, bad):
    _edit_entry(gset, lambda e: e.update(file=bad))
    with pytest.raises(GoldenError, match="file .*expected"):
        golden.verify(gset, cases=_small_cases())


@pytest.mark.parametrize("bad_id", ["../layer_norm/x", "layer_norm/../../x", "/abs/x", "layer_norm/.hidden"])
def test_hostile_case_ids_are_refused(gset, bad_id):
    _edit_entry(gset, lambda e: e.update(id=bad_id, file=bad_id + ".npz"))
    with pytest.raises(GoldenError, match="is not of the form op/name"):
        store.read_manifest(gset)


def test_symlinked_case_file_is_refused(gset, tmp_path):
    p = gset / (SMALL[0] + ".npz")
    outside = tmp_path / "outside.npz"
    shutil.move(p, outside)
    os.symlink(outside, p)          # same bytes, same hash: only the symlink rule can refuse it
    _fails(gset, "symlink")


def test_symlinked_directory_is_refused(gset, tmp_path):
    d = gset / "layer_norm"
    shutil.move(d, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", d)
    _fails(gset, "symlink")


def test_symlinked_manifest_is_refused(gset, tmp_path):
    shutil.move(gset / store.MANIFEST, tmp_path / "m.json")
    os.symlink(tmp_path / "m.json", gset / store.MANIFEST)
    with pytest.raises(GoldenError, match="symlink"):
        golden.verify(gset)


def test_shape_mismatch_with_the_manifest(gset):
    _edit_entry(gset, lambda e: e["arrays"]["step0.output.y"].update(shape=[100, 6]))
    _fails(gset, r"header has shape \(6, 100\).*manifest says \(100, 6\)")


def test_header_claiming_a_huge_array_is_refused_before_allocation(gset):
    def change(m):
        npy = bytearray(m["step0.output.y.npy"])
        header = npy[10:10 + int.from_bytes(npy[8:10], "little")].decode("latin1")
        fake = header.replace("(6, 100)", "(1000000000000,)")
        fake = fake[:len(header)].ljust(len(header))
        m["step0.output.y.npy"] = bytes(npy[:10]) + fake.encode("latin1") + bytes(npy[10 + len(header):])
        return m
    _rewrite_zip(gset, SMALL[0], change)
    _fails(gset, r"header has shape \(1000000000000,\)")


def test_manifest_declaring_huge_arrays_is_refused_before_reading(gset):
    _edit_entry(gset, lambda e: e["arrays"]["step0.output.y"].update(shape=[10**6, 10**6]))
    with pytest.raises(GoldenError, match="exceeds the limit"):
        golden.load_case(gset, SMALL[0])


def test_data_shorter_than_its_header_says(gset):
    _rewrite_zip(gset, SMALL[0], lambda m: {**m, "step0.output.y.npy": m["step0.output.y.npy"][:-8]})
    _fails(gset, "data bytes")


def test_missing_or_extra_zip_members(gset):
    man = _rewrite_zip(gset, SMALL[0], lambda m: {**{k: v for k, v in m.items() if k != "step0.grad.x.npy"},
                                                   "evil.npy": _npy(np.zeros(2))})
    assert man
    _fails(gset, r"unexpected \['evil.npy'\], missing \['step0.grad.x.npy'\]")


def test_duplicate_zip_member(gset):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # zipfile warns about the duplicate name we write on purpose
        _rewrite_zip(gset, SMALL[0], lambda m: list(m.items()) + [("step0.output.y.npy", _npy(np.zeros((6, 100))))])
    _fails(gset, "lists a member twice")


def test_missing_file(gset):
    os.remove(gset / (SMALL[1] + ".npz"))
    _fails(gset, "does not exist", cid=SMALL[1])


def test_extra_unknown_file_fails_verify(gset):
    """Decision: the directory holds exactly what the manifest lists; a stray file (a leftover case a
    checker might glob, or a planted one) fails verify. Loading listed cases still works."""
    (gset / "layer_norm" / "planted.npz").write_bytes(b"x")
    report = golden.verify(gset, cases=_small_cases())
    assert not report.ok and any("planted.npz: file not listed" in f for f in report.failures)
    golden.load_case(gset, SMALL[0])


@pytest.mark.parametrize("text,match", [
    ("{", "not valid UTF-8 JSON"),
    ('{"format": "refnorm-golden/1", "format": "x"}', "appears twice"),
    ('{"format": "refnorm-golden/1", "generator": {}, "cases": [], "x": NaN}', "NaN is not valid"),
    ('{"format": "other/1", "generator": {}, "cases": []}', "format 'other/1'"),
    ('[1]', "expected a JSON object"),
])
def test_bad_manifest(gset, text, match):
    (gset / store.MANIFEST).write_text(text)
    with pytest.raises(GoldenError, match=match):
        golden.verify(gset)


def test_missing_manifest(gset):
    os.remove(gset / store.MANIFEST)
    with pytest.raises(GoldenError, match="MANIFEST.json does not exist"):
        golden.verify(gset)


def test_stale_set_against_a_changed_table(gset):
    rows = _small_cases()
    changed = [C.Case(**{**rows[0].__dict__, "config": {**rows[0].config, "eps": 1e-6}})] + rows[1:]
    report = golden.verify(gset, cases=changed)
    assert not report.ok and any("differs from the case table in ['config']" in f for f in report.failures)
    report = golden.verify(gset, cases=rows[1:])
    assert any("not in the case table" in f for f in report.failures)
    report = golden.verify(gset, cases=rows + [C.by_id()["layer_norm/normal_f64_9x7"]])
    assert any("not in the golden set" in f for f in report.failures)


def test_verify_some_ops_only(gset):
    os.remove(gset / (SMALL[2] + ".npz"))             # a batch_norm file: not looked at below
    report = golden.verify(gset, cases=_small_cases(), ops=["layer_norm"])
    assert report.ok and report.cases == 2, report.summary()
    assert not golden.verify(gset, cases=_small_cases(), ops=["batch_norm"]).ok


def test_empty_set_does_not_pass(tmp_path):
    build(tmp_path / "g", cases=[])
    report = golden.verify(tmp_path / "g", cases=[])
    assert not report.ok and "no cases verified" in report.summary()


# ------------------------------------------------------------------------------ atomic builds
def _snapshot(d):
    return {os.path.relpath(os.path.join(p, f), d): Path(os.path.join(p, f)).read_bytes()
            for p, _, fs in os.walk(d) for f in fs}


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_interrupted_build_leaves_the_previous_set_intact(gset, monkeypatch, exc):
    before = _snapshot(gset)
    real = B.materialize
    calls = []

    def failing(case):
        calls.append(case.id)
        if len(calls) == 3:
            raise exc
        return real(case)
    monkeypatch.setattr(B, "materialize", failing)
    with pytest.raises(type(exc)):
        build(gset, cases=list(reversed(_small_cases())))
    assert len(calls) == 3
    assert _snapshot(gset) == before
    assert sorted(os.listdir(gset.parent)) == ["golden"], "no temporary directories left behind"
    monkeypatch.setattr(B, "materialize", real)
    assert golden.verify(gset, cases=_small_cases(), exact=True).ok


def test_failed_swap_restores_the_previous_set(gset, monkeypatch):
    before = _snapshot(gset)
    real_rename = os.rename

    def rename(src, dst):
        if os.path.basename(os.fspath(src)).startswith(".golden.build-"):
            raise OSError("disk full")
        return real_rename(src, dst)
    monkeypatch.setattr(store.os, "rename", rename)
    with pytest.raises(OSError, match="disk full"):
        build(gset, cases=_small_cases())
    assert _snapshot(gset) == before
    assert sorted(os.listdir(gset.parent)) == ["golden"]


def test_build_refuses_to_replace_a_directory_that_is_not_a_golden_set(tmp_path):
    (tmp_path / "notgolden").mkdir()
    (tmp_path / "notgolden" / "precious.txt").write_text("keep me")
    with pytest.raises(GoldenError, match="refusing to replace"):
        build(tmp_path / "notgolden", cases=_small_cases()[:1])
    assert (tmp_path / "notgolden" / "precious.txt").read_text() == "keep me"


def test_rebuild_replaces_the_set(gset):
    build(gset, cases=_small_cases()[:2])
    assert [e["id"] for e in store.read_manifest(gset)["cases"]] == list(SMALL[:2])
    assert not (gset / "batch_norm").exists()


def test_golden_never_imports_a_framework():
    code = ("import sys, refnorm.golden\n"
            "bad = [m for m in ('torch', 'jax', 'tensorflow') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_cli_golden_verify_exit_codes(gset, capsys, monkeypatch):
    from refnorm.cli import main
    from refnorm.golden import commands
    monkeypatch.setattr(commands, "CASES", tuple(_small_cases()))   # the small set is the whole table here
    assert main(["golden", "verify", str(gset), "--quiet"]) == 0
    assert "golden: OK" in capsys.readouterr().out
    p = gset / (SMALL[0] + ".npz")
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    assert main(["golden", "verify", str(gset), "--quiet"]) == 1
    assert "golden: FAILED" in capsys.readouterr().out
    assert main(["golden", "verify", str(gset), "--op", "no_such_norm"]) == 2
    (gset / store.MANIFEST).write_text("{not json")
    assert main(["golden", "verify", str(gset)]) == 2
    assert "refnorm: error:" in capsys.readouterr().err
