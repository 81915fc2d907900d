"""The platform a check ran on: recorded in every report (``Report.platform_info``: JSON ``platform``,
the text and Markdown headers, JUnit properties), and the CPU flags a known-failure entry can be scoped
to (``platform=avx512_fp16`` / ``platform=!avx512_fp16``: core.read_expected_failures).

Why it matters: the same program computes differently on different CPUs. XLA (jax) computes a float16
program natively on a CPU with AVX512-FP16 (recent Intel Xeons: every operation rounds to float16) and
with float32 intermediates elsewhere (AMD Zen 4: a fused float16 chain rounds once), so a jax check
fails other cases there (known_failures/jax.txt, docs/tolerances.md, "Platform-scoped entries").

What is recorded (``probe``):

* ``cpu``: the model name (/proc/cpuinfo's "model name"; ``platform.processor()`` elsewhere), ``arch``
  (``platform.machine()``), ``flags``: those of ``NUMERIC_FLAGS`` the CPU has (the ones that change
  what a compiler may compute natively: half-precision arithmetic, bfloat16 dot products, matrix
  units, fused multiply-add); ``flags_known`` False where they could not be read (no /proc/cpuinfo):
  a scoped entry then matches as if the CPU had none;
* ``gpu``: name and driver when a GPU backend ran (torch's CUDA initialized, or jax on a GPU), else None;
* ``versions``: numpy, Python, and each framework a backend imported (torch, jax, jaxlib, onnxruntime,
  triton): read from ``sys.modules``, never imported here.

Nothing here imports a framework.
"""
from __future__ import annotations

import functools
import platform as _platform
import sys

# CPU flags (Linux /proc/cpuinfo spelling) that change numerics: what the compiler may compute natively.
NUMERIC_FLAGS = ("avx512_fp16", "avx512_bf16", "amx_bf16", "amx_fp16", "amx_tile", "avx512f", "avx512_vnni",
                 "avx_vnni", "avx2", "fma", "f16c",                       # x86-64
                 "fphp", "asimdhp", "bf16", "sve", "sve2")                # aarch64 (half arithmetic, bfloat16)
FRAMEWORKS = ("torch", "jax", "jaxlib", "onnxruntime", "triton")


def parse_cpuinfo(text: str) -> tuple:
    """(model name, set of NUMERIC_FLAGS present) from the text of /proc/cpuinfo (its first processor);
    the model is "" when the text names none."""
    model, flags = "", set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "model name" and not model:
            model = " ".join(value.split())
        elif key in ("flags", "features") and not flags:
            flags = set(value.split()) & set(NUMERIC_FLAGS)
    return model, flags


@functools.lru_cache(maxsize=None)
def cpu() -> dict:
    """{"model", "arch", "flags": sorted NUMERIC_FLAGS present, "flags_known"} of this machine (cached)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            model, flags = parse_cpuinfo(f.read())
        known = True
    except OSError:
        model, flags, known = "", set(), False
    return {"model": model or _platform.processor() or "unknown", "arch": _platform.machine(),
            "flags": sorted(flags), "flags_known": known}


def _nvidia_driver() -> str:
    """The NVIDIA kernel driver's version (/proc/driver/nvidia/version), or ""."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            words = f.readline().split()
    except OSError:
        return ""
    return next((w for w in words if w[:1].isdigit() and "." in w), "")


def gpu() -> dict | None:
    """{"name", "driver", "runtime"} of the GPU a backend used (torch's CUDA initialized in this process,
    or jax running on a GPU), else None. Reads only frameworks already imported."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            rt = f"CUDA {torch.version.cuda}" if torch.version.cuda else f"HIP {getattr(torch.version, 'hip', '')}"
            return {"name": torch.cuda.get_device_name(torch.cuda.current_device()), "driver": _nvidia_driver(),
                    "runtime": rt}
    except Exception:                                                # noqa: BLE001 - a record, never a verdict
        pass
    jax = sys.modules.get("jax")
    try:
        if jax is not None and jax.default_backend() not in ("cpu",):
            return {"name": jax.devices()[0].device_kind, "driver": _nvidia_driver(),
                    "runtime": jax.default_backend()}
    except Exception:                                                # noqa: BLE001
        pass
    return None


def versions() -> dict:
    """{"python", "numpy", and each of FRAMEWORKS already imported: its version}."""
    import numpy
    out = {"python": _platform.python_version(), "numpy": numpy.__version__}
    for name in FRAMEWORKS:
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = str(getattr(mod, "__version__", "unknown"))
    return out


def probe() -> dict:
    """The platform record of a report: {"cpu", "arch", "flags", "flags_known", "gpu", "versions"}."""
    c = cpu()
    return {"cpu": c["model"], "arch": c["arch"], "flags": list(c["flags"]), "flags_known": c["flags_known"],
            "gpu": gpu(), "versions": versions()}


def describe(p: dict) -> str:
    """One line: 'platform: CPU (arch; flags a,b,...); GPU name (driver D, runtime); numpy X, jax Y, ...'."""
    flags = ",".join(p.get("flags") or ()) if p.get("flags_known", True) else "unknown"
    out = f"platform: {p.get('cpu', '?')} ({p.get('arch', '?')}; numeric flags: {flags or 'none'})"
    g = p.get("gpu")
    if g:
        out += f"; GPU {g.get('name')} (driver {g.get('driver') or '?'}, {g.get('runtime') or '?'})"
    v = p.get("versions") or {}
    return out + "; " + ", ".join(f"{k} {v[k]}" for k in v)


# ---------------------------------------------------------------- scopes of known-failure entries
class ScopeError(ValueError):
    pass


def parse_scope(text: str) -> tuple:
    """``platform=`` of a known-failure entry: comma-separated CPU flags (NUMERIC_FLAGS), each optionally
    negated with "!" (``avx512_fp16``: only on a CPU with it; ``!avx512_fp16``: only on one without it;
    several: all must hold). Returns ((flag, wanted: bool), ...); an unknown flag, an empty scope or a
    flag both wanted and negated is a ScopeError naming it."""
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        neg = tok.startswith("!")
        flag = tok[1:] if neg else tok
        if flag not in NUMERIC_FLAGS:
            raise ScopeError(f"platform={text!r}: unknown platform flag {flag!r}; expected a CPU flag, optionally "
                             f"negated with '!', one of: {', '.join(NUMERIC_FLAGS)}")
        out.append((flag, not neg))
    wanted = {}
    for flag, w in out:
        if wanted.setdefault(flag, w) != w:
            raise ScopeError(f"platform={text!r}: {flag!r} both required and excluded: the entry could never apply")
    return tuple(out)


def scope_matches(scope: tuple, flags) -> bool:
    """Whether an entry scoped to ``scope`` (parse_scope; () = every platform) applies on a CPU with
    ``flags``."""
    have = set(flags)
    return all((flag in have) == wanted for flag, wanted in scope)


def scopes_exclusive(a: tuple, b: tuple) -> bool:
    """No CPU can match both scopes (one requires a flag the other excludes)."""
    return any((flag, not wanted) in set(b) for flag, wanted in a)


def describe_scope(scope: tuple) -> str:
    return ",".join(("" if w else "!") + f for f, w in scope)
