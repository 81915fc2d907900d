"""Issue 16 (first part): generated cases (recipes), named suites, memory layouts, expected-error cases;
the bugs the stored golden set cannot reach, planted in a small NumPy kernel, caught by the suite or
layout named for them."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from refnorm import registry
from refnorm.check import Returned, run_check, stream
from refnorm.check.core import run_generated
from refnorm.cli import main
from refnorm.golden import cases as T
from refnorm.golden import generate as G
from refnorm.golden import layouts as L
from refnorm.golden.commands import load_case

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
sys.path.insert(0, ROOT)
from examples.tiny_backend import TinyBackend  # noqa: E402
from planted.beyond import ChannelsLastMisread, Dense, RowLimit, SquareInDtype, TailDrop  # noqa: E402

MOD = __name__
pytest_plugins = ["pytester"]


# ------------------------------------------------------------------------------------ recipes
@pytest.mark.parametrize("text, what", [
    ("layernorm shape=4x8", "'layernorm' cannot be generated; expected one of: layer_norm"),
    ("layer_norm", "shape=AxB... is required"),
    ("layer_norm shape=4by8", "shape='4by8': expected sizes joined by 'x'"),
    ("layer_norm shape=4x8 dtype=float8", "dtype='float8'; expected one of: float64"),
    ("layer_norm shape=4x8 regime=gauss", "regime='gauss'; expected one of: normal"),
    ("layer_norm shape=4x8 layout=nhwc", "layout='nhwc'; expected one of: contiguous"),
    ("layer_norm shape=4x8 colour=red", "unknown key 'colour'"),
    ("layer_norm shape=4x8 dtype=float16 dtype=float32", "'dtype' given twice"),
    ("layer_norm shape=4x8 layout=channels_last", "channels_last needs an (N, C, *spatial) activation"),
    ("group_norm shape=2x8x4", "group_norm needs groups=G"),
    ("layer_norm shape=4x8 expect=maybe", "expect='maybe'"),
])
def test_bad_recipes_name_the_value_and_the_choices(text, what, capsys):
    with pytest.raises(G.RecipeError, match=None) as e:
        G.parse(text)
    assert what in str(e.value), str(e.value)
    assert main(["check", "--backend", "numpy", "--generate", text, "--no-progress"]) == 2
    assert what in capsys.readouterr().err


def test_unknown_suite_and_layout_are_usage_errors(capsys):
    assert main(["check", "--backend", "numpy", "--suite", "fast", "--no-progress"]) == 2
    assert "unknown suite 'fast'; expected one of: production, boundaries" in capsys.readouterr().err
    assert main(["check", "--backend", "numpy", "--layout", "nhwc", "--no-progress"]) == 2
    assert "--layout 'nhwc': expected one of: contiguous" in capsys.readouterr().err


def test_a_recipe_of_a_golden_rows_parameters_regenerates_its_inputs_bit_for_bit():
    row = T.by_id()["layer_norm/mean1e3_f16_260x3"]
    r = G.parse(f"layer_norm shape=260x3 dtype=float16 regime=mean1e3 seed={row.seed}")
    case, stored = G.materialize(r), load_case(GOLDEN, row.id)
    for got, want in zip(case.steps, stored.steps):
        for k in want.inputs:
            assert np.array_equal(np.asarray(got.inputs[k]).view(np.uint16), np.asarray(want.inputs[k]).view(np.uint16))
        for k in want.cotangents:
            assert np.array_equal(np.asarray(got.cotangents[k]), np.asarray(want.cotangents[k]))
    assert G.materialize(r).steps[0].inputs["x"].tobytes() == case.steps[0].inputs["x"].tobytes()   # again


def test_every_suite_parses_and_says_why():
    for name, s in G.SUITES.items():
        assert s["why"] and s["recipes"], name
        for text, why in s["recipes"]:
            assert why, text
            G.parse(text)


def test_a_case_too_big_for_this_machine_is_skipped_before_anything_is_allocated(monkeypatch):
    monkeypatch.setattr(G, "memory_available", lambda: 1 << 20)
    r = G.parse("layer_norm shape=4096x1024 dtype=float16")
    monkeypatch.setattr(G, "materialize", lambda r: pytest.fail("drew a case that does not fit"))
    rep = run_generated(TinyBackend(), [r])
    c = rep.cases[0]
    need = G.memory_needed(r, stream.bytes_per_element("layer_norm")) / 2 ** 30      # judged in blocks
    assert c.status == "skipped" and f"needs ~{need:.1f} GiB to judge" in c.message and "not attempted" in c.message


# ------------------------------------------------------------------------------------ layouts
@pytest.mark.parametrize("layout", list(L.LAYOUTS))
def test_layouts_keep_the_values_and_change_the_strides(layout):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float16)
    a = L.apply(layout, x)
    assert np.array_equal(a, x) and a.shape == x.shape
    if layout == "channels_last":
        assert a.strides[1] == a.itemsize and not a.flags.c_contiguous
    elif layout == "transposed":
        assert a.flags.f_contiguous and not a.flags.c_contiguous
    elif layout == "strided":
        assert not a.flags.c_contiguous and not a.flags.f_contiguous and a.strides[-1] == 2 * a.itemsize
    elif layout == "offset":
        assert a.flags.c_contiguous and a.base is not None and a.__array_interface__["data"][0] != \
            a.base.__array_interface__["data"][0]


def test_the_torch_adapter_keeps_the_layout():
    torch = pytest.importorskip("torch")
    from refnorm.check.backends.torch_backend import _to_torch
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = _to_torch(torch, "x", L.apply("channels_last", x), torch.float32, "cpu")
    assert t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
    t = _to_torch(torch, "x", L.apply("strided", x), torch.float32, "cpu")
    assert t.stride()[-1] == 2 and bool((t.numpy() == x).all())
    t = _to_torch(torch, "x", L.apply("offset", x), torch.float32, "cpu")
    assert t.storage_offset() == 1 and bool((t.numpy() == x).all())


def test_a_layout_that_does_not_apply_skips_with_the_reason():
    rep = run_check(TinyBackend(), GOLDEN, case_ids=["layer_norm/normal_f32_6x100"], layout="channels_last")
    c = rep.cases[0]
    assert c.status == "skipped" and "channels_last needs an (N, C, *spatial) activation" in c.message


# ---------------------------------------------------------------------------- expected errors
class Lenient(TinyBackend):
    """Normalizes whatever it gets (no check of the value count per channel)."""
    def supports(self, call):
        return None

    def run(self, call):
        x = call.inputs["x"]
        return Returned({"y": np.zeros_like(x)}, {})


def test_expected_error_case_passes_when_the_backend_raises_and_fails_when_it_does_not():
    r = G.parse("batch_norm shape=1x16 expect=error")
    rep = run_generated(get_numpy(), [r])
    assert rep.cases[0].status == "passed" and "raised as required: ShapeError" in rep.cases[0].message
    rep = run_generated(Lenient(), [r])
    assert rep.cases[0].status == "failed" and "returned a result where it must raise" in rep.cases[0].message


def get_numpy():
    from refnorm.check import get_backend
    return get_backend("numpy")


# ---------------------------------------------------- planted bugs the stored golden set cannot reach


def _golden(backend):
    rep = run_check(backend, GOLDEN, ops=["layer_norm"])
    return [c.id for c in rep.cases if c.status in ("failed", "error")]


def test_a_dropped_tail_block_of_weight_gradient_partials_is_caught_by_the_boundaries_suite():
    # the stored set has one case with more than 4096 rows (65537 = 16 * 4096 + 1): it loses one row,
    # barely beyond the bound; the suite's 20001 rows of 3 lose 3617 rows, far beyond it
    golden = run_check(TailDrop(), GOLDEN, ops=["layer_norm"])
    worst_golden = max((a.ratio for c in golden.cases for a in c.arrays if a.name in ("weight", "bias")), default=0)
    rep = run_generated(TailDrop(), [G.parse(t) for t, _ in G.suite("boundaries")], ops=["layer_norm"])
    caught = {c.id: c for c in rep.cases if c.status == "failed"}
    c = caught.get("layer_norm/gen_normal_f16_20001x3")
    assert c is not None, [(c.id, c.status) for c in rep.cases]
    assert {a.name for a in c.arrays if a.verdict == "failed"} <= {"weight", "bias"}
    assert c.worst_ratio > 10 * max(worst_golden, 1.0), (c.worst_ratio, worst_golden)


def test_a_kernel_that_reads_strided_input_as_dense_is_caught_under_the_strided_layout():
    assert _golden(Dense()) == []                       # every stored case is handed C-contiguous
    rep = run_check(Dense(), GOLDEN, ops=["layer_norm"], dtypes=["float32"], layout="strided")
    assert rep.count("failed") >= 5 and "layout strided" in __import__("refnorm.check.report", fromlist=["x"]) \
        .case_text([c for c in rep.cases if c.status == "failed"][0], "x")


def test_squares_of_deviations_in_float16_are_caught_by_the_overflow_suite():
    assert _golden(SquareInDtype()) == []               # no stored float16 case has |x - mean| > 256
    rep = run_generated(SquareInDtype(), [G.parse(t) for t, _ in G.suite("overflow")], ops=["layer_norm"])
    assert [c.status for c in rep.cases] == ["failed"], [(c.id, c.message) for c in rep.cases]


def test_check_generate_from_the_command_line(tmp_path, capsys):
    js = tmp_path / "r.json"
    rc = main(["check", "--backend", "examples.tiny_backend:TinyBackend", "--no-progress", "--json", str(js),
               "--generate", "rms_norm shape=300x1027 dtype=bfloat16", "--generate",
               "layer_norm shape=3x4x5 dtype=float16 layout=transposed"])
    assert rc == 0, capsys.readouterr().out[-2000:]
    cases = json.loads(js.read_text())["cases"]
    assert [c["status"] for c in cases] == ["passed", "passed"]
    assert cases[1]["layout"] == "transposed" and cases[1]["recipe"].startswith("layer_norm shape=3x4x5")


def test_generated_cases_from_refnorm_testing():
    from refnorm.testing import assert_generated_case_passes
    res = assert_generated_case_passes(TinyBackend(), "rms_norm shape=40x1027 dtype=bfloat16 layout=strided")
    assert res.status == "passed" and res.layout == "strided"
    with pytest.raises(AssertionError, match="FAILED layer_norm/gen_.*layout strided"):
        assert_generated_case_passes(Dense(), "layer_norm shape=40x1027 dtype=float32 layout=strided")


def test_generated_cases_in_the_pytest_plugin(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_mine="def test_x():\n    assert True\n")
    r = pytester.runpytest_subprocess("--refnorm-backend", "examples.tiny_backend:TinyBackend",
                                      "--refnorm-generate", "layer_norm shape=33x129 dtype=float16",
                                      "--refnorm-generate", "rms_norm shape=8x4x5 dtype=bfloat16 layout=channels_last",
                                      "-v")
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(["*refnorm::layer_norm/gen_normal_f16_33x129 PASSED*"])
    r = pytester.runpytest_subprocess("--refnorm-backend", "examples.tiny_backend:TinyBackend",
                                      "--refnorm-generate", "layer_norm shape=33 dtype=float8")
    assert r.ret == pytest.ExitCode.USAGE_ERROR


def test_generated_cases_listed_as_expected_failures_in_the_pytest_plugin(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, os.path.join(ROOT, "tests"),
                                                      os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_mine="def test_x():\n    assert True\n")
    pytester.path.joinpath("known.txt").write_text(f"{OVERFLOW_LN}  fails=output.y  x^2 in float16 overflows\n")
    args = ("--refnorm-backend", "planted.beyond:SquareInDtype", "--refnorm-suite", "overflow", "--refnorm-ops",
            "layer_norm", "--refnorm-expect-failures", "known.txt")
    r = pytester.runpytest_subprocess(*args)
    r.assert_outcomes(passed=1, xfailed=1)
    pytester.path.joinpath("known.txt").write_text("layer_norm/gen_nothing_f16_1x1  fails=output.y  a typo\n")
    r = pytester.runpytest_subprocess(*args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*expected failures name case(s) not in the golden set, a suite or the generated "
                            "cases: layer_norm/gen_nothing_f16_1x1*"])


def test_a_channels_last_reading_error_is_caught_under_the_channels_last_layout():
    assert _golden(ChannelsLastMisread()) == []
    rep = run_check(ChannelsLastMisread(), GOLDEN, ops=["layer_norm", "rms_norm"], layout="channels_last")
    failed = [c for c in rep.cases if c.status == "failed"]
    assert len(failed) >= 3 and all(c.layout == "channels_last" for c in failed), [(c.id, c.status) for c in rep.cases]
    rep = run_generated(ChannelsLastMisread(), [G.parse("rms_norm shape=8x16x4x4 dtype=bfloat16 layout=channels_last")])
    assert rep.cases[0].status == "failed"


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_rows_beyond_2_to_the_23_are_caught_by_the_limits_suite():
    """F08: the last rows of a kernel with an indexing limit at 2^23 rows; the limits suite's 2^23 + 1
    rows are judged here (in blocks: ~10 s, under 1 GiB), its numel > 2^31 cases are skipped with the
    memory they need."""
    rep = run_generated(RowLimit(), [G.parse(t) for t, _ in G.suite("limits")])
    st = {c.id: (c.status, c.message) for c in rep.cases}
    assert st["rms_norm/gen_normal_eps1e-05_f32_8388609x1"][0] == "failed", st
    assert all(s == "skipped" and "GiB to judge" in m for cid, (s, m) in st.items() if "8388609" not in cid), st


def test_a_layout_override_reproduces_with_one_layout_key():
    r = G.parse("layer_norm shape=2x3x8 dtype=float32 layout=transposed")
    rep = run_generated(Dense(), [r], layout="strided")
    c = rep.cases[0]
    assert c.layout == "strided" and c.recipe.split().count("layout=strided") == 1 and "transposed" not in c.recipe
    from refnorm.check.report import reproduce
    cmd = reproduce(c.id, "x", layout=c.layout, recipe=c.recipe)
    assert G.parse(cmd.split("--generate ")[1].strip("'")).layout == "strided"


def test_every_op_of_the_suites_can_be_drawn():
    """Every op a suite holds gets a case drawn (cotangents for every differentiable output the call
    produces: add_norm's residual_out too), at the suites' own keywords, its first axis cut to 2."""
    seen = {}
    for name in ("production", "boundaries", "overflow"):
        for text, _ in G.suite(name):
            r = G.parse(text)
            seen.setdefault(r.case.op, r)
    for op, r in seen.items():              # the first axis (tokens, batch) cut to 2
        small = G.parse(" ".join(w if not w.startswith("shape=") else
                                 "shape=" + "x".join(["2"] + w[6:].split("x")[1:]) for w in r.text.split()))
        case = G.materialize(small)
        spec = registry.get(op)             # every output the call produces (add_norm's y1 only with weight1)
        assert set(case.steps[0].cotangents) == set(spec.differentiable) & set(spec.produced(case.steps[0].inputs)), op


# ------------------------------------- expected failures name generated and suite cases (issue 34, item 7)
OVERFLOW_LN = "layer_norm/gen_dev_overflow_f16_64x512"       # the overflow suite's layer_norm case


def _check_suite(tmp_path, capsys, lines, *extra):
    f = tmp_path / "known.txt"
    f.write_text("".join(line + "\n" for line in lines))
    rc = main(["check", "--backend", f"{MOD}:SQUARE", "--suite", "overflow", "--ops", "layer_norm",
               "--no-progress", "--expect-failures", str(f), *extra])
    out = capsys.readouterr()
    return rc, out.out + out.err


SQUARE = SquareInDtype()


def test_a_suite_case_listed_as_it_fails_is_an_expected_failure(tmp_path, capsys):
    rc, out = _check_suite(tmp_path, capsys, [f"{OVERFLOW_LN}  fails=output.y  x^2 in float16 overflows"])
    assert rc == 0 and "1 expected failures" in out, out[-2000:]
    # listed as failing otherwise: the check fails, saying how
    rc, out = _check_suite(tmp_path, capsys, [f"{OVERFLOW_LN}  fails=output.y,output.rstd  x^2 overflows"])
    assert rc == 1 and "other arrays fail: fails=output.y" in out, out[-2000:]
    # a golden id in the same list is left alone when the golden set is not judged
    rc, out = _check_suite(tmp_path, capsys, [f"{OVERFLOW_LN}  fails=output.y  x^2 overflows",
                                              "layer_norm/normal_f32_6x100  fails=output.y  a golden entry"])
    assert rc == 0 and "1 expected failures" in out, out[-2000:]


def test_a_listed_generated_case_that_passes_fails_the_check(tmp_path, capsys):
    r = G.parse("rms_norm shape=8x40 dtype=float16")
    f = tmp_path / "known.txt"
    f.write_text(f"{r.id}  fails=output.y  listed, but the numpy backend passes it\n")
    rc = main(["check", "--backend", "numpy", "--generate", r.text, "--no-progress", "--expect-failures", str(f)])
    out = capsys.readouterr().out
    assert rc == 1 and f"FAILED {r.id}" in out and "but it passed: remove it from the list" in out, out[-2000:]


def test_an_expected_failure_naming_no_known_case_is_an_error(tmp_path, capsys):
    gen = G.parse("rms_norm shape=8x40 dtype=float16").id
    for line in ("layer_norm/gen_nothing_f16_1x1  fails=output.y  a typo", f"{gen}  fails=output.y  not this run"):
        rc, out = _check_suite(tmp_path, capsys, [line])
        assert rc == 2 and "expected failures name case(s) not in the golden set, a suite or the generated " \
                           f"cases: {line.split()[0]}" in out, out[-2000:]
    # a generated id listed while the golden set is judged: as any id not in the golden set
    f = tmp_path / "known.txt"
    f.write_text(f"{gen}  fails=output.y  not this run\n")
    assert main(["check", "--backend", "numpy", "--golden", GOLDEN, "--case", "layer_norm/normal_f32_6x100",
                 "--no-progress", "--expect-failures", str(f)]) == 2
    assert f"not in the golden set, a suite or the generated cases: {gen}" in capsys.readouterr().err


# ------------------------------------------ every option of every op in a recipe (issue 34, item 5)
# op -> (the base recipe's keys, {option: (a valid value other than the base case's, what the id shows)})
OPTIONS = {
    "batch_norm": ("shape=4x3x5", {"momentum": (0.5, "_momentum=0.5"), "eps": (0.3, "_eps0.3_"),
                                   "convention": ("onnx", "_convention=onnx")}),
    "layer_norm": ("shape=2x3x4", {"normalized_shape": ([3, 4], "_k2_"), "eps": (0.3, "_eps0.3_"),
                                   "weight_offset": (2.0, "_weight_offset=2.0")}),
    "instance_norm": ("shape=2x3x5", {"momentum": (0.5, "_momentum=0.5"), "eps": (0.3, "_eps0.3_")}),
    "group_norm": ("shape=2x4x5 num_groups=2", {"num_groups": (4, "_g4_"), "eps": (0.3, "_eps0.3_")}),
    "rms_norm": ("shape=2x3x4", {"normalized_shape": ([3, 4], "_k2_"), "eps": (0.3, "_eps0.3_"),
                                 "eps_placement": ("outside", "_eps_placement=outside"),
                                 "weight_offset": (1.0, "_weight_offset=1.0")}),
    "local_response_norm": ("shape=2x6x5", {"size": (3, "_size=3"), "alpha": (0.5, "_alpha=0.5"),
                                            "beta": (0.5, "_beta=0.5"), "k": (2.0, "_k=2.0"),
                                            "window": ("onnx", "_window=onnx")}),
    "lp_normalize": ("shape=4x6", {"p": (3.0, "_p=3.0"), "dim": (0, "_dim=0"), "eps": (0.3, "_eps0.3_"),
                                   "zero_rule": ("onnx", "_zero_rule=onnx")}),
    "mean_variance_norm": ("shape=2x3x4x5", {"axes": ([2, 3], "_axes=[2,3]"), "eps": (0.3, "_eps0.3_")}),
    "weight_norm": ("shape=4x6", {"dim": (1, "_dim=1")}),
    "weight_standardization": ("shape=4x6", {"eps": (0.3, "_eps0.3_")}),
    "min_max_scale": ("shape=4x6", {"dim": (0, "_dim=0"), "eps": (0.3, "_eps0.3_")}),
    "z_score": ("shape=4x6", {"dim": (0, "_dim=0"), "ddof": (0, "_ddof=0"), "eps": (0.3, "_eps0.3_")}),
    "unified_norm": ("shape=2x5x3", {"window": ([3, 2], "_window=[3,2]"), "warmup": (2, "_warmup=2"),
                                     "outlier_filtration": (True, "_outlier_filtration=true"),
                                     "eps": (0.3, "_eps0.3_"), "momentum": (0.5, "_momentum=0.5"),
                                     "preset": ("paper", "_preset=paper")}),
    "offline_batch_norm": ("shape=4x3x5", {"momentum": (0.3, "_momentum=0.3"), "eps": (0.3, "_eps0.3_")}),
    "power_norm": ("shape=4x5x3", {"alpha_fwd": (0.7, "_alpha_fwd=0.7"), "alpha_bkw": (0.95, "_alpha_bkw=0.95"),
                                   "eps": (0.3, "_eps0.3_")}),
    "batch_renorm": ("shape=4x3x5", {"momentum": (0.3, "_momentum=0.3"), "r_max": (2.0, "_r_max=2.0"),
                                     "d_max": (1.0, "_d_max=1.0"), "eps": (0.3, "_eps0.3_")}),
    # normalized_shape: the maker normalizes the last axis only, so [64] is the one valid value (below)
    "norm_quant": ("shape=4x64", {"normalized_shape": ([64], None), "norm": ("layer_norm", "_ln_"),
                                  "eps": (0.3, "_eps0.3_"), "quant_dtype": ("int8", "_i8_"),
                                  "scale_ub": (0.01, "_scale_ub=0.01"), "min_scale": (0.001, "_floor0.001_")}),
    "add_norm": ("shape=4x8", {"normalized_shape": ([8], None), "norm": ("rms_norm", "_rms_"),
                               "eps": (0.3, "_eps0.3_"), "dropout_p": (0.1, "_dropout_p=0.1"),
                               "prenorm": (False, "_noprenorm_"), "residual_in_fp32": (True, "_fp32res_"),
                               "weight_offset": (1.0, "_zc_")}),
    "adaptive_layer_norm": ("shape=2x3x8", {"eps": (0.3, "_eps0.3_")}),
    "gated_norm": ("shape=4x12", {"norm": ("layer_norm", "_ln_"), "norm_before_gate": (True, "_nbg_"),
                                  "group_size": (4, "_gs4_"), "eps": (0.3, "_eps0.3_")}),
    "dyt": ("shape=4x8", {}),
    "poly_norm": ("shape=4x8", {"eps": (0.3, "_eps0.3_")}),
    "norm_quant_block": ("shape=4x64", {"normalized_shape": ([64], None), "norm": ("layer_norm", "_ln_"),
                                        "eps": (0.3, "_eps0.3_"), "format": ("mxfp8", "_mx_"),
                                        "block_size": (32, "_g32_"), "element_dtype": ("float8_e5m2", "_e5m2_"),
                                        "scale_rule": ("pow2", "_pow2_"), "min_scale": (0.001, "_floor0.001_"),
                                        "residual_in_fp32": (True, "_fp32res_")}),
    "group_norm_silu": ("shape=2x4x5 num_groups=2", {"num_groups": (4, "_g4_"), "eps": (0.3, "_eps0.3_")}),
}
EVERY_OPTION = [(op, k) for op in registry.names() for k in registry.get(op).options]


def _with(base, key, value):
    """The base recipe with ``key`` set (replacing the base's own)."""
    words = [w for w in base.split() if not w.startswith(f"{key}=")]
    return " ".join(words + [f"{key}={json.dumps(value, separators=(',', ':'))}"])


def test_the_option_table_covers_every_option_of_every_op():
    assert sorted((op, k) for op, (_, opts) in OPTIONS.items() for k in opts) == sorted(EVERY_OPTION)
    assert sorted((op, k) for op, kinds in G.OPTION_KINDS.items() for k in kinds) == sorted(EVERY_OPTION)
    assert set(G.MAKERS) == set(registry.names())
    import inspect
    for op, (make, _, _) in G.MAKERS.items():    # every row maker keyword a recipe takes has a kind too
        for p, v in inspect.signature(make).parameters.items():
            if v.kind == v.KEYWORD_ONLY and p not in G.NOT_KEYS + G.IGNORED.get(op, ()) + tuple(registry.get(op).options):
                assert p in G.MAKER_KINDS, (op, p)


@pytest.mark.parametrize("op, key", EVERY_OPTION)
def test_every_option_is_settable_in_a_recipe_and_part_of_the_id(op, key):
    keys, opts = OPTIONS[op]
    base = G.parse(f"{op} {keys}")
    value, shown = opts[key]
    r = G.parse(_with(f"{op} {keys}", key, value))
    assert r.case.config[key] == value
    if shown is None:                                   # the one value there is: the base case's own
        assert base.case.config[key] == value and r.id == base.id
    else:
        assert base.case.config.get(key, registry.get(op).options[key]) != value
        assert r.id != base.id and shown in r.id + "_", (r.id, shown)
    # the option reaches the reference and the backend: the numpy backend (the reference) passes it
    rep = run_generated(get_numpy(), [r])
    assert rep.cases[0].status in ("passed", "partial"), (rep.cases[0].id, rep.cases[0].message)
    assert rep.cases[0].id == r.id


@pytest.mark.parametrize("text, what", [
    ("layer_norm shape=4x8 eps=abc", "eps=abc; expected a finite number >= 0"),
    ("layer_norm shape=4x8 eps=-1", "eps=-1; expected a finite number >= 0"),
    ("rms_norm shape=4x8 eps=tiny", "eps=tiny; expected a finite number >= 0, or null"),
    ("rms_norm shape=4x8 eps_placement=between", "eps_placement=between; expected one of: inside, outside"),
    ("rms_norm shape=4x8 weight_offset=one", "weight_offset=one; expected a finite number"),
    ("norm_quant shape=4x8 min_scale=-1", "min_scale=-1; expected a finite number >= 0, or null"),
    ("norm_quant shape=4x8 quant_dtype=fp4", "quant_dtype=fp4; expected one of: float8_e4m3fn, float8_e5m2, int8"),
    ("norm_quant shape=4x8 normalized_shape=[4,8]", "normalized_shape=[4,8]; expected the activation's trailing "
                                                    "sizes: [8]"),
    ("layer_norm shape=2x3x4 normalized_shape=[2,4]", "normalized_shape=[2,4]; expected the activation's trailing "
                                                      "sizes: [4] or [3,4] or [2,3,4]"),
    ("add_norm shape=4x8 dropout_p=1", "dropout_p=1; expected a number in [0, 1)"),
    ("add_norm shape=4x8 prenorm=yes", "prenorm=yes; expected true or false"),
    ("add_norm shape=4x8 dropout_p=0.1 dropout=false", "dropout_p=0.1 and dropout=false disagree"),
    ("lp_normalize shape=4x8 dim=2", "dim=2; expected an axis or a non-empty list of distinct axes of the 2-D "
                                     "activation (-2 .. 1)"),
    ("mean_variance_norm shape=2x3x4 axes=[1,-2]", "axes=[1,-2]; expected a non-empty list of distinct axes of the 3-D"),
    ("mean_variance_norm shape=2x3x4 axes=2", "axes=2; expected a non-empty list of distinct axes"),
    ("group_norm shape=2x6x4 num_groups=4", "groups=4; expected a divisor of the 6 channels"),
    ("group_norm shape=2x6x4 num_groups=0", "num_groups=0; expected an integer >= 1"),
    ("group_norm shape=2x6x4 num_groups=2 groups=3", "num_groups=2 and groups=3 disagree"),
    ("unified_norm shape=2x5x3 window=[3,2,1]", "window=[3,2,1]; expected an integer >= 1 or a list of two"),
    ("batch_norm shape=4x3 convention=keras", "convention=keras; expected one of: torch, onnx"),
    ("rms_norm shape=4x8 options=1", "unknown key 'options'; expected one of: shape, dtype, regime, layout, seed, "
                                     "expect, normalized_shape, eps, eps_placement, weight_offset, k, affine"),
    ("local_response_norm shape=2x4x5 eps=0.3", "unknown key 'eps'"),       # not an option of the op
    ("layer_norm shape=4x8 k=3", "k=3; expected an integer in 1 .. 2"),
    ("batch_norm shape=4x3 steps=train", 'steps=train; expected a non-empty list of "train" or "eval"'),
    ("norm_quant shape=4x8 qd=fp8", "qd=fp8; expected one of: float8_e4m3fn, float8_e5m2, int8"),
    ("adaptive_layer_norm shape=2x3x8 affine=w", "affine='w'; expected one of: ss, s, none"),
    ("add_norm shape=4x8 rowscale=maybe", "rowscale=maybe; expected true or false"),
    ("gated_norm shape=4x12 group_size=5", "group_size=5; expected a divisor of the hidden dimension 12"),
    ("gated_norm shape=4x12 group_size=0", "group_size=0; expected an integer >= 1, or null"),
    ("gated_norm shape=4x12 norm=group_norm", "norm=group_norm; expected one of: rms_norm, layer_norm"),
    ("gated_norm shape=4x12 z_regime=huge", "z_regime=huge; expected one of:"),
    ("group_norm_silu shape=2x6x4", "group_norm_silu needs groups=G"),
    ("group_norm_silu shape=2x6x4 num_groups=4", "groups=4; expected a divisor of the 6 channels"),
    ("group_norm_silu shape=2x6x4 groups=2 bias_regime=neg5", "bias_regime=neg5; expected one of: neg20, neg90"),
])
def test_bad_option_values_name_the_key_the_value_and_what_was_expected(text, what, capsys):
    with pytest.raises(G.RecipeError) as e:
        G.parse(text)
    assert what in str(e.value) and "Error:" not in str(e.value), str(e.value)
    assert main(["check", "--backend", "numpy", "--generate", text, "--no-progress"]) == 2
    assert what in capsys.readouterr().err


def test_recipes_differing_only_in_an_option_get_different_ids():
    pairs = [("layer_norm shape=4x8 weight_offset=1.0", "layer_norm shape=4x8 weight_offset=2.0"),
             ("rms_norm shape=4x8 eps_placement=outside", "rms_norm shape=4x8"),
             ("z_score shape=4x8 eps=1e-5", "z_score shape=4x8"),            # the row maker's grid eps is not it
             ("layer_norm shape=4x8 eps=1e-5", "layer_norm shape=4x8 eps=1.0000001e-5"),   # beyond %g
             ("add_norm shape=4x8 dropout=true", "add_norm shape=4x8 dropout=true dropout_p=0.5"),
             ("norm_quant shape=4x8 ub=8.0", "norm_quant shape=4x8 scale_ub=0.5"),
             ("batch_norm shape=4x3 steps=[\"train\",\"eval\"]", "batch_norm shape=4x3"),
             ("layer_norm shape=4x8 seed=1", "layer_norm shape=4x8 seed=2")]
    for a, b in pairs:
        ra, rb = G.parse(a), G.parse(b)
        assert ra.case.config != rb.case.config or ra.seed != rb.seed or ra.case.steps != rb.case.steps, (a, b)
        assert ra.id != rb.id, (a, b, ra.id)
    # the same case spelt two ways is one id; a default given explicitly changes nothing
    assert G.parse("rms_norm shape=4x8 weight_offset=1.0 eps_placement=outside seed=3").id == \
        G.parse("rms_norm shape=4x8 seed=3 eps_placement=outside weight_offset=1.0").id
    assert G.parse("layer_norm shape=4x8 eps=1e-5").id == G.parse("layer_norm shape=4x8").id
    assert G.parse("group_norm shape=2x4x3 groups=2").id == G.parse("group_norm shape=2x4x3 num_groups=2").id


def test_a_recipes_seed_is_derived_from_its_own_words():
    """Whatever keys it sets (affine, options): the crc32 of its sorted words, so it regenerates bit for bit."""
    import zlib
    for name in G.SUITES:
        for text, _ in G.suite(name):
            assert G.parse(text).seed == zlib.crc32(("gen:" + " ".join(sorted(text.split()))).encode()), text


def test_the_suites_ids_are_unchanged_by_the_option_keys():
    """Recipes that set no option the name does not spell keep the plain name (known_failures and tests
    name such ids): a few suite ids as they were before options entered the id."""
    ids = {G.parse(t).id for name in G.SUITES for t, _ in G.suite(name)}
    assert {"layer_norm/gen_normal_f16_20001x3", "layer_norm/gen_normal_zc_bf16_64x4096",
            "norm_quant/gen_normal_ln_e4m3_static_wb_f16_128x5120", "group_norm/gen_normal_g32_f16_2x320x32x32@"
            "channels_last", "add_norm/gen_mean1e3_fp32res_xnormal_bf16_128x4096",
            "rms_norm/gen_normal_eps1e-05_bf16_300x1029"} <= ids, sorted(ids)
    assert not any("=" in i for i in ids), sorted(i for i in ids if "=" in i)


CHOICES = [(op, k, v) for op, kinds in G.OPTION_KINDS.items() for k, kind in kinds.items() if isinstance(kind, tuple)
           for v in kind]


def _context(op, key, value):
    """The other option a choice needs: norm_quant_block's scale rules and element dtypes belong to a format."""
    if op == "norm_quant_block" and key in ("scale_rule", "element_dtype"):
        from refnorm.norms import norm_quant_block as NB
        table = NB.FORMAT_RULES if key == "scale_rule" else NB.FORMAT_ELEMENTS
        return " format=" + next(f for f, vs in table.items() if value in vs)
    return ""


@pytest.mark.parametrize("op, key, value", CHOICES)
def test_every_choice_a_recipe_offers_is_one_the_reference_takes(op, key, value):
    keys, _ = OPTIONS[op]
    r = G.parse(f"{op} {keys} {key}={value}{_context(op, key, value)}")
    rep = run_generated(get_numpy(), [r])
    assert rep.cases[0].status in ("passed", "partial"), (r.id, rep.cases[0].message)
    with pytest.raises(Exception, match=f"{key}='nonsense'"):      # and a word outside them it refuses
        registry.evaluate(op, {k: np.ones(v.shape) for k, v in G.materialize(r).steps[0].inputs.items()},
                          config={**r.case.config, key: "nonsense"})
