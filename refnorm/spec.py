"""The evaluate contract: what a normalizer module declares (NormSpec) and what it returns.

A normalizer module ``refnorm/norms/<name>.py`` holds pure ``forward``/``backward`` functions in
float64 and one ``SPEC``. The registry (``refnorm.registry``) validates a call against the SPEC and
then calls ``SPEC.forward`` and, when cotangents are given, ``SPEC.backward``:

    SPEC.forward(inputs, config, state, training) -> Forward(outputs, state, ctx)
    SPEC.backward(ctx, cotangents)                -> Backward(grads, state)

* ``inputs``: name -> float64 ndarray (read-only views of float64 inputs, copies of others; optional inputs that were not given are absent).
* ``config``: every option, defaults filled in (a default may be ``DEFAULT``: the module resolves it,
  e.g. batch_norm's momentum depends on its convention).
* ``state``: name -> float64 ndarray copies (empty when the caller gave none).
* ``cotangents``: one float64 array for every name in ``SPEC.differentiable`` (zeros where the caller
  gave none), shaped like the matching output.
* ``Backward.state`` is ``None`` when the backward leaves the state alone; a stateful normalizer whose
  backward updates state (Unified Normalization) returns the state after the backward.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np


class _Marker:
    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name


REQUIRED = _Marker("REQUIRED")
"""Option default meaning: the caller must give this option."""

DEFAULT = _Marker("DEFAULT")
"""Option default meaning: the module picks the value (documented with the option)."""


@dataclass(frozen=True)
class Forward:
    outputs: dict[str, np.ndarray]
    state: dict[str, np.ndarray]
    ctx: Any = None


@dataclass(frozen=True)
class Backward:
    grads: dict[str, np.ndarray]
    state: dict[str, np.ndarray] | None = None

    @classmethod
    def of(cls, state=None, **grads) -> "Backward":
        """The gradients given by name, leaving out those that are None (inputs the call did not have)."""
        return cls({k: v for k, v in grads.items() if v is not None}, state)


@dataclass(frozen=True)
class Result:
    """What ``refnorm.evaluate`` returns. All arrays are float64 (``num_batches_tracked`` int64)."""

    outputs: Mapping[str, np.ndarray]
    grads: Mapping[str, np.ndarray] = field(default_factory=dict)
    state: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self):
        for attr in ("outputs", "grads", "state"):
            object.__setattr__(self, attr, MappingProxyType(dict(getattr(self, attr))))


@dataclass(frozen=True)
class NormSpec:
    """Declaration of one normalizer for the registry.

    name:           registry key, module name, CLI value (spelled as in torch.nn.functional).
    summary:        one line: the equation.
    inputs:         every accepted input name, in order; ``required`` lists the mandatory ones.
    outputs:        every output name (the first is the main output, ``y`` or ``w``).
    differentiable: outputs that accept a cotangent; the others are statistics (as in torch's
                    native_* ops, whose backward takes only the main output's gradient).
    options:        option name -> default (``REQUIRED``, ``DEFAULT`` or a JSON-able value).
    state:          state names accepted (stateful normalizers only).
    returned:       outputs every backend must return besides the differentiable ones (a forward-only
                    op's main outputs: norm_quant's q and scale).
    output_dtypes:  (config, case dtype) -> {output: dtype name}: the dtype an output is returned and
                    judged in where it is not the case dtype (norm_quant: q in its quantized dtype, the
                    scale in float32); None: every output in the case dtype.
    masks:          inputs that are masks (0/1 values, not differentiable); ``evaluate`` accepts them as
                    booleans too (True = 1).
    dtype_options:  None, or (option values, {input name: the dtype it was given in}) -> the same with the
                    defaults that depend on the input dtype resolved (rms_norm's eps=None: the machine
                    epsilon of torch's opmath dtype for x's dtype); ``refnorm.registry.resolve_options``.
    drawn_masks:    mask input -> (the input it drops, the option holding the drop probability): the
                    dropout keep-masks a backend may draw itself and return (``Returned.masks``; add_norm's
                    mask and mask1, 1 = kept, drop probability ``dropout_p``); refnorm/check/masks.py.
    produced_by:    output -> the input it needs: an output produced only when that input is given
                    (add_norm's y1 with weight1); the others are always produced.
    resolve:        None, or option values -> the same with every ``DEFAULT`` replaced by the value the
                    module picks (batch_norm: momentum 0.1 or 0.9 by convention); used by
                    ``refnorm.check.backends.base.complete_config`` so a backend never sees ``DEFAULT``.
    """

    name: str
    summary: str
    inputs: tuple[str, ...]
    required: tuple[str, ...]
    outputs: tuple[str, ...]
    options: Mapping[str, Any]
    forward: Callable[..., Forward]
    backward: Callable[..., Backward]
    differentiable: tuple[str, ...] = ("y",)
    state: tuple[str, ...] = ()
    integer_state: tuple[str, ...] = ()
    returned: tuple[str, ...] = ()
    output_dtypes: Callable[..., Mapping[str, str]] | None = None
    masks: tuple[str, ...] = ()
    resolve: Callable[[dict], dict] | None = None
    dtype_options: Callable[[dict, Mapping[str, Any]], dict] | None = None
    drawn_masks: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    produced_by: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        assert set(self.required) <= set(self.inputs), self.name
        assert set(self.masks) <= set(self.inputs), self.name
        assert set(self.differentiable) <= set(self.outputs), self.name
        assert set(self.returned) <= set(self.outputs), self.name
        assert set(self.produced_by) <= set(self.outputs) and set(self.produced_by.values()) <= set(self.inputs), \
            self.name
        assert all(k in self.inputs and v[0] in self.inputs and v[1] in self.options
                   for k, v in self.drawn_masks.items()), self.name
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "produced_by", MappingProxyType(dict(self.produced_by)))
        object.__setattr__(self, "drawn_masks", MappingProxyType(dict(self.drawn_masks)))

    def produced(self, input_names) -> tuple[str, ...]:
        """The outputs a call with these inputs produces (``produced_by``), in ``outputs`` order."""
        given = set(input_names)
        return tuple(k for k in self.outputs if k not in self.produced_by or self.produced_by[k] in given)
