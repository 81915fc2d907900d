"""Materialize a golden ``Case`` as arrays: draw, round to the case dtype, evaluate in float64.

Drawing (``draw``): one ``np.random.default_rng(case.seed)`` per case, never a global seed. In order:
the parameters (weight ~ 1 + 0.5 N(0,1), bias ~ 0.5 N(0,1), a 0/1 pad_mask with ~25% ones), the
initial state, then per step the activations (by the case's regime, or the step's own) and the
cotangents (N(0,1), one per differentiable output, shaped by a forward probe). Every
drawn value is rounded to the case dtype at once, so inputs, cotangents and initial state are
exactly representable in it, and the reference sees exactly what a backend sees. The generators use
only standard_normal/random/integers and IEEE-exact arithmetic (+, *, /, sqrt), so a redraw is bit
for bit the same on every platform with the same NumPy random streams (verify checks this).

Expected values (``expected``): ``refnorm.evaluate`` in float64 from the rounded inputs, with the config's
dtype-dependent defaults resolved for the case dtype (``_config``: rms_norm's eps=None); a stateful
case chains ``Result.state`` from step to step in float64 (never rounded to the case dtype).

Storage dtypes: float64, float32 and float16 values are stored natively. bfloat16 values are stored
as their float32 values (the widening is exact): any npz reader can use them, and NumPy's .npy format
cannot record ml_dtypes' bfloat16 (it saves it as an anonymous 2-byte void). The manifest marks such
arrays ``"value_dtype": "bfloat16"``; ``as_case_dtype`` returns them as ml_dtypes.bfloat16. Expected
outputs, gradients and states are float64; integer state (num_batches_tracked) is int64.

Array names in a case file: ``init.state.<k>`` (initial state), and for step i
``step<i>.input.<k>``, ``step<i>.cotangent.<k>``, ``step<i>.output.<k>``, ``step<i>.grad.<k>``,
``step<i>.state.<k>`` (the state after step i).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import refnorm

from ..registry import resolve_options
from .cases import PARAM_REGIMES, Case

STORAGE = {"float64": np.dtype("<f8"), "float32": np.dtype("<f4"), "float16": np.dtype("<f2"),
           "bfloat16": np.dtype("<f4")}


def round_to(values: np.ndarray, dtype: str, what: str = "value") -> np.ndarray:
    """``values`` rounded to nearest in ``dtype``, in its storage dtype; overflow is an error.

    bfloat16 draws are rounded to float32 first, then to bfloat16 (what ``torch.tensor(v).to(torch.bfloat16)``
    does with a float32 tensor): a fixed rule, so a draw is the same under every ml_dtypes (before 0.7 its
    float64 -> bfloat16 cast went through float32; from 0.7 it rounds once). The drawn values are exact
    bfloat16 numbers either way; only which neighbour a value near a tie gets is fixed by this rule."""
    # C order: refnorm's float64 sums depend (at the last bit) on the memory layout of the input,
    # so build and verify must evaluate identically laid-out arrays to agree bit for bit
    if dtype == "bfloat16":
        f32 = np.asarray(values, dtype=np.float64).astype(np.float32, order="C")
        bits = f32.astype(ml_dtypes.bfloat16, order="C").view(np.uint16)
        out = (bits.astype(np.uint32) << 16).view(np.float32)    # widened exactly: its bits, 16 zeros appended
    else:
        out = np.asarray(values, dtype=np.float64).astype(STORAGE[dtype], order="C")
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{what}: drawn values overflow {dtype}; change the case's regime")
    return out


def as_case_dtype(stored: np.ndarray, dtype: str) -> np.ndarray:
    """A stored input in its case dtype (bfloat16 as ml_dtypes.bfloat16; exact)."""
    if dtype == "bfloat16" and stored.dtype.kind == "f":
        return stored.astype(ml_dtypes.bfloat16)
    return stored


def is_representable(stored: np.ndarray, dtype: str) -> bool:
    """True when every value of ``stored`` is exactly a ``dtype`` number."""
    if stored.dtype.kind != "f":
        return True
    back = round_to(stored[np.isfinite(stored)], dtype) if dtype != "float64" else stored
    return bool(np.array_equal(back.astype(np.float64), stored[np.isfinite(stored)].astype(np.float64)))


# ----------------------------------------------------------------------------------- regimes
def _heavy_tail(rng, m, n):
    z = rng.standard_normal((m, n))
    chi2 = (rng.standard_normal((2, m, n)) ** 2).sum(axis=0)
    return z / np.sqrt(chi2 / 2)                  # Student t, 2 degrees of freedom


def _zero_runs(rng, m, n):
    """N(0,1); the first 128 values of each slice and each aligned run of 16 with probability 1/2 zeroed."""
    v = rng.standard_normal((m, n))
    keep = np.repeat(rng.random((m, -(-n // 16))) >= 0.5, 16, axis=1)[:, :n]
    keep[:, :128] = False
    return np.where(keep, v, 0.0)


def _decades(rng, shape):
    """A weight whose aligned runs of 128 values have magnitudes 1, 1e-5, 1e-36, 1e-3 in turn (times
    1 + 0.5 N(0,1)): block scales across 36 decades (E4M3 subnormal and zero block scales of NVFP4, float32
    subnormal group scales, E8M0's lowest scale 2^-127)."""
    mag = np.array([1.0, 1e-5, 1e-36, 1e-3])[(np.arange(shape[-1]) // 128) % 4]
    return (1.0 + 0.5 * rng.standard_normal(shape)) * mag


def _outlier(rng, m, n):
    v = rng.standard_normal((m, n))
    if n:
        v[np.arange(m), rng.integers(0, n, size=m)] *= 100.0
    return v


def _spike(rng, m, n):
    v = rng.standard_normal((m, n))
    if m:
        v[rng.integers(0, m)] *= 25.0
    return v


GENERATORS = {  # regime -> (rng, m slices, n values per slice) -> (m, n) float64
    "normal": lambda rng, m, n: rng.standard_normal((m, n)),
    "mean1e3": lambda rng, m, n: 1e3 + rng.standard_normal((m, n)),
    "mean1e4": lambda rng, m, n: 1e4 + rng.standard_normal((m, n)),
    "mean1e4_std16": lambda rng, m, n: 1e4 + 16.0 * rng.standard_normal((m, n)),
    "const": lambda rng, m, n: np.repeat(1e3 * rng.standard_normal((m, 1)), n, axis=1),
    "std1e-3": lambda rng, m, n: 1e-3 * rng.standard_normal((m, n)),
    "one_std1e-3": lambda rng, m, n: 1.0 + 1e-3 * rng.standard_normal((m, n)),
    "sq_overflow": lambda rng, m, n: 300.0 + 20.0 * rng.standard_normal((m, n)),
    "dev_overflow": lambda rng, m, n: 500.0 * rng.standard_normal((m, n)),
    "heavy_tail": _heavy_tail,
    "outlier": _outlier,
    "zero": lambda rng, m, n: np.zeros((m, n)),
    "spike": _spike,
    "std1e-6": lambda rng, m, n: 1e-6 * rng.standard_normal((m, n)),
    "std1e-4": lambda rng, m, n: 1e-4 * rng.standard_normal((m, n)),
    "pm1": lambda rng, m, n: np.where(rng.random((m, n)) < 0.5, -1.0, 1.0),
    "gate_sat": lambda rng, m, n: np.where(rng.random((m, n)) < 0.5, -1.0, 1.0) * (5.0 + 95.0 * rng.random((m, n))),
    "zero_runs": lambda rng, m, n: _zero_runs(rng, m, n),
}
PARAM_GENERATORS = {
    "weight": lambda rng, shape: 1.0 + 0.5 * rng.standard_normal(shape),
    "bias": lambda rng, shape: 0.5 * rng.standard_normal(shape),
    "mask": lambda rng, shape: (rng.random(shape) < 0.25).astype(np.float64),   # 1 = padding, ~25%
    "qscale": lambda rng, shape: 2.0 + 2.0 * rng.random(shape),   # an amplitude in [2, 4), / qmax (_param)
    "keep": lambda rng, shape: (rng.random(shape) >= 0.25).astype(np.float64),  # a dropout keep-mask, ~75% ones
    "ties": lambda rng, shape: (rng.integers(-30, 30, size=shape) + 0.5) / 8,   # (k + 0.5) / 8: ties over 1/8
    "eighth": lambda rng, shape: np.full(shape, 0.125),                          # a static scale of 1/8
    "alpha": lambda rng, shape: 0.5 + 0.25 * rng.random(shape),                  # dyt's alpha near its init 0.5
    "alpha_big": lambda rng, shape: 4.0 + 8.0 * rng.random(shape),               # dyt: alpha * x saturates tanh
    "alpha_tiny": lambda rng, shape: 1e-3 * (1.0 + rng.random(shape)),           # dyt: t ~ alpha * x
    "decades": lambda rng, shape: _decades(rng, shape),
    # NVFP4's static encode scale 2688 / a (vLLM's input_global_scale), a calibrated amax a in [3, 6): the
    # blocks whose amax exceeds it have block scales above 448, which saturate
    "nvfp4_enc": lambda rng, shape: 2688.0 / (3.0 + 3.0 * rng.random(shape)),
    # group_norm_silu's far-negative pre-activations: silu(-20) = -4e-8 (float16 subnormals), silu(-90) = -7e-38
    # (exp(90) overflows float32: a kernel's x / (1 + exp(-x)) returns -0 there)
    "neg20": lambda rng, shape: -20.0 + rng.standard_normal(shape),
    "neg90": lambda rng, shape: -90.0 + rng.standard_normal(shape),
}
STATE_GENERATORS = {
    "stat_mean": lambda rng, shape: 0.5 * rng.standard_normal(shape),
    "stat_var": lambda rng, shape: 0.5 + rng.random(shape),
    "zeros": lambda rng, shape: np.zeros(shape),
    "ones": lambda rng, shape: np.ones(shape),
}


def _layout(shape, axes):
    """(perm, m, n): x.transpose(perm).reshape(m, n) puts each reduction slice in one row."""
    axes = tuple(range(len(shape))) if axes is None else tuple(axes)
    keep = [i for i in range(len(shape)) if i not in axes]
    return keep + list(axes), math.prod(shape[i] for i in keep), math.prod(shape[i] for i in axes)


def draw_activation(rng, regime: str, shape, axes, view=None) -> np.ndarray:
    """Values of ``shape`` drawn slice by slice: the slices are ``axes`` of ``view`` (or of ``shape``)."""
    vshape = tuple(shape if view is None else view)
    perm, m, n = _layout(vshape, axes)
    v = GENERATORS[regime](rng, m, n)
    return v.reshape([vshape[i] for i in perm]).transpose(np.argsort(perm)).reshape(shape)


def slice_cond(x: np.ndarray, axes, eps: float) -> float:
    """max over slices with nonzero variance of |mean| / sqrt(var + eps) (two-pass, float64).

    Constant slices are left out: the reference's re-centred deviations are exactly zero there,
    whatever the mean, so they carry no cancellation error.
    """
    perm, m, n = _layout(x.shape, axes)
    if m * n == 0:
        return 0.0
    s = np.asarray(x, dtype=np.float64).transpose(perm).reshape(m, n)
    mean = s.mean(axis=1, keepdims=True)
    var = ((s - mean) ** 2).mean(axis=1)
    ok = var > 0
    if not ok.any():
        return 0.0
    return float(np.max(np.abs(mean[ok, 0]) / np.sqrt(var[ok] + eps)))


# ----------------------------------------------------------------------------------- drawing
@dataclass
class Drawn:
    """The drawn (rounded, storage-dtype) arrays of one case."""
    init_state: dict
    inputs: list          # per step: input name -> array
    cotangents: list      # per step: output name -> array


def draw(case: Case, seed: int | None = None, output_shapes: dict | None = None) -> Drawn:
    """Draw every input, cotangent and initial state of ``case`` (see the module docstring); ``seed``
    replaces the case's own (refnorm.strategies draws cases that are not in the golden set).
    ``output_shapes``: {differentiable output: shape} when the caller knows them; otherwise a forward
    call of the reference gives them (the same draws either way)."""
    spec = refnorm.get(case.op)
    rng = np.random.default_rng(case.seed if seed is None else seed)
    params = {k: round_to(_param(case, k, rng, shape), case.dtype, f"{case.id}: {k}")
              for k, shape in case.inputs.items() if k in PARAM_REGIMES}
    init = {}
    for k, (shape, regime) in case.state.items():
        if regime.startswith("count:"):
            init[k] = np.full(shape, int(regime[6:]), dtype=np.int64)
        else:
            init[k] = round_to(STATE_GENERATORS[regime](rng, shape), case.dtype, f"{case.id}: state {k}")
    inputs, cots = [], []
    for step in case.steps:
        kind, _, regime = step.partition(":")
        acts = {k: round_to(draw_activation(rng, case.input_regimes.get(k, regime or case.regime), shape, case.axes,
                                            case.view), case.dtype, f"{case.id}: {k}")
                for k, shape in case.inputs.items() if k not in PARAM_REGIMES}
        step_inputs = {k: acts[k] if k in acts else params[k] for k in case.inputs}
        shapes = output_shapes
        if shapes is None:
            probe = refnorm.evaluate(case.op, _f64(step_inputs), config=_config(case), state=_f64(init),
                                     training=kind == "train")
            shapes = {k: probe.outputs[k].shape for k in spec.differentiable if k in probe.outputs}
        # an output the call does not produce (add_norm's y1 without weight1) has no cotangent
        made = spec.produced(step_inputs)
        cots.append({k: round_to(rng.standard_normal(shapes[k]), case.dtype, f"{case.id}: d{k}")
                     for k in spec.differentiable if k in made})
        inputs.append(step_inputs)
    return Drawn(init, inputs, cots)


def _param(case: Case, k: str, rng, shape) -> np.ndarray:
    """A parameter drawn by its regime; a static quantization scale (regime "qscale") is the drawn
    amplitude over the qmax of the case's quant_dtype, so the values beyond the amplitude saturate."""
    regime = case.param_regimes.get(k, PARAM_REGIMES[k])
    v = PARAM_GENERATORS[regime](rng, shape)
    if regime == "qscale":
        from ..norms.norm_quant import qmax
        v = v / qmax(case.config.get("quant_dtype", "float8_e4m3fn"))
    return v


def _config(case: Case) -> dict:
    """The case's config for ``refnorm.evaluate`` on its widened (float64) arrays: the defaults that depend
    on the input dtype resolved for the case dtype (rms_norm's eps=None: float32's eps for a float32,
    float16 or bfloat16 case), as the backend's own framework resolves them from the case-dtype arrays."""
    return resolve_options(case.op, case.config, case.dtype)


def _f64(arrays: dict) -> dict:
    return {k: (v if v.dtype.kind in "iu" else v.astype(np.float64)) for k, v in arrays.items()}


def default_eps(case: Case) -> float:
    eps = case.config.get("eps", refnorm.get(case.op).options.get("eps", 0.0))
    return float(eps) if isinstance(eps, (int, float)) and not isinstance(eps, bool) else 0.0


# ------------------------------------------------------------------------------ expected values
def expected(case: Case, drawn: Drawn, engine: str = "fast") -> list[dict]:
    """Per step: {"outputs", "grads", "state", "compare", "cond"} from refnorm.evaluate in float64
    (``engine``: "fast" or "spec", the plain specification)."""
    state = _f64(drawn.init_state)
    steps = []
    for i, step in enumerate(case.steps):
        kind = step.partition(":")[0]
        res = refnorm.evaluate(case.op, _f64(drawn.inputs[i]), config=_config(case),
                               grad_outputs=_f64(drawn.cotangents[i]), state=state, training=kind == "train",
                               engine=engine)
        state = {k: np.asarray(v) for k, v in res.state.items()}
        outputs = list(res.outputs)
        if kind == "eval" and case.eval_outputs is not None:
            outputs = [k for k in outputs if k in case.eval_outputs]
        act = next((v for k, v in drawn.inputs[i].items() if k not in PARAM_REGIMES), None)
        if "residual_out" in res.outputs:       # add_norm normalizes the sum: its conditioning is the sum's
            act = res.outputs["residual_out"]
        if act is not None and case.view is not None:
            act = act.reshape(case.view)
        cond = slice_cond(act, case.axes, default_eps(case)) if case.centered and act is not None else 0.0
        steps.append({"outputs": {k: np.asarray(v, dtype=np.float64) for k, v in res.outputs.items()},
                      "grads": {k: np.asarray(v, dtype=np.float64) for k, v in res.grads.items()},
                      "state": dict(state),
                      "compare": {"outputs": outputs, "grads": [k for k in res.grads if k not in case.ignore_grads],
                                  "state": list(res.state)},
                      "training": kind == "train", "cond": cond})
    return steps


def case_arrays(case: Case, drawn: Drawn, steps: list[dict]) -> dict[str, np.ndarray]:
    """Every array of a case file, by its name in the file (see the module docstring)."""
    arrays = {f"init.state.{k}": v for k, v in drawn.init_state.items()}
    for i, st in enumerate(steps):
        arrays.update({f"step{i}.input.{k}": v for k, v in drawn.inputs[i].items()})
        arrays.update({f"step{i}.cotangent.{k}": v for k, v in drawn.cotangents[i].items()})
        arrays.update({f"step{i}.output.{k}": v for k, v in st["outputs"].items()})
        arrays.update({f"step{i}.grad.{k}": v for k, v in st["grads"].items()})
        if case.state:
            arrays.update({f"step{i}.state.{k}": v for k, v in st["state"].items()})
    return {k: np.asarray(v).copy(order="C") for k, v in arrays.items()}


def drawn_from_arrays(case: Case, arrays: dict[str, np.ndarray]) -> Drawn:
    """The drawn part (inputs, cotangents, initial state) of a loaded case file."""
    def pick(prefix):
        return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
    return Drawn(pick("init.state."), [pick(f"step{i}.input.") for i in range(len(case.steps))],
                 [pick(f"step{i}.cotangent.") for i in range(len(case.steps))])


def is_drawn(name: str) -> bool:
    """Arrays in the case dtype (drawn), as opposed to expected float64 values."""
    return name.startswith("init.") or ".input." in name or ".cotangent." in name


def materialize(case: Case) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays, manifest fields) of one case: everything store.write_set needs."""
    drawn = draw(case)
    steps = expected(case, drawn)
    arrays = case_arrays(case, drawn, steps)
    value_dtypes = {k: case.dtype for k, v in arrays.items()
                    if case.dtype == "bfloat16" and is_drawn(k) and v.dtype.kind == "f"}
    meta = {"case": case.to_json(),
            "steps": [{"training": s["training"], "cond": s["cond"], "compare": s["compare"]} for s in steps]}
    return arrays, {"meta": meta, "value_dtypes": value_dtypes}
