"""A torch kernel as a backend in one line: ``from_torch(fn, op, contract=...)``.

    from refnorm.check.backends import from_torch
    backend = from_torch(my_layer_norm, "layer_norm", contract="strict")          # def my_layer_norm(x, weight,
                                                                                   #   bias, *, normalized_shape, eps)
    backend = from_torch(MyLayerNorm, "layer_norm", contract="stats_d",             # a torch.autograd.Function:
                         signature=("x", "weight", "bias", "normalized_shape", "eps"))   # apply() is positional
    backend = from_torch(F.layer_norm, "layer_norm", contract="strict",
                         signature=("x", "normalized_shape", "weight", "bias", "eps"))

What the backend does with one ``Call`` (base.py): every input becomes a tensor on ``device`` holding
exactly its values (never a rounding) and keeping its memory layout (strides and offset: the checker
hands strided, transposed and channels_last arrays, refnorm/golden/layouts.py), the activations (``x``;
``v`` and ``g`` of weight_norm) in the case dtype, the parameters (``weight``, ``bias``) in the case dtype
or, with ``param_dtype="float32"``, in float32 for float16/bfloat16 cases (mixed precision), masks
(``spec.masks``: unified_norm's ``pad_mask``, add_norm's keep-masks ``mask``/``mask1``) as ``torch.bool``
(``mask_dtype="case"``: 0/1 in the case dtype), never differentiated. ``fn`` is called with them
and with the options, then the gradient of every floating input is taken by
``torch.autograd.grad`` with the case's cotangent, and outputs and gradients come back as NumPy arrays
in the dtype ``fn`` returned them in.

How ``fn`` is called:
* ``signature``: the names passed positionally, in order: refnorm input names (an absent optional
  input is passed as None), option names, state names, or ``"training"``. Default: the op's inputs
  that ``fn``'s own positional parameters name, in ``fn``'s order (``def add_ln(x, residual, weight,
  bias, *, eps)``: those four; a case with an input ``fn`` does not take, e.g. rowscale, is skipped,
  saying so), read by ``inspect.signature`` when it names the op's required inputs and every other
  positional parameter without a default is an option; otherwise (an autograd Function's ``apply``, an
  unreadable signature) the op's inputs in refnorm's order (``refnorm.get(op).inputs``).
* ``options``: the options passed as keywords: a mapping {refnorm option name: fn's keyword}, or a
  sequence of names passed under their own name. Default: every option of the op that ``fn``'s
  signature names (``inspect.signature``; none for an autograd Function, whose ``apply`` takes
  positional arguments only). A list option (normalized_shape) is passed as a tuple of ints.
* An option neither in ``signature`` nor in ``options`` is not passed: ``fn`` implements its default
  only, so a case that sets another value is SKIPPED, with the reason (never judged against a
  computation that ignored it). A required ``normalized_shape`` not passed means ``fn`` normalizes the
  last axis: the cases with ``normalized_shape == [x.shape[-1]]`` run, the others are skipped.
* State (batch_norm's running statistics): each state name in ``signature``/``options`` gets a fresh
  tensor that ``fn`` may update in place (as F.batch_norm does); it is returned as the new state. A
  call with state that ``fn`` does not take is skipped.
* ``outputs``: the names of what ``fn`` returns, in order (a tensor or a tuple). Default: as many of
  the op's outputs, in refnorm's order, as ``fn`` returns (one tensor: ``y``; three for layer_norm:
  ``y``, ``mean``, ``rstd``); statistics returned are judged too.

Arrays ``fn`` does not compute (``not_computed``): {"grad.NAME" or "output.NAME": why}, e.g.
``{"grad.rowscale": "the fused kernel does not compute it"}``: never taken from autograd, never
zero-filled, reported unchecked with that reason (``Returned.not_computed``; the case is partial, never
passed). An undeclared gradient for which autograd returns None (fn does not compute it, or cut it from
the graph) makes the case an ERROR naming it: a None can be a bug (a detached weight), and a zero fill
would be judged as a false failure, so the kernel's author states it instead. An op without
differentiable outputs (norm_quant) takes no gradient.

The precision contract is declared here, never guessed: ``contract`` is a kind ("strict", "stats_d",
"epi_d"; with ``reduction``: "block" by default, "tree", "serial"), a ``Contract``, a mapping from the
case dtype to either, or a function ``call -> Contract``. README.md, "Your torch kernel in one line",
says how to choose it.

torch is imported when ``from_torch`` is called (the caller has it: ``fn`` is a torch kernel), never by
``import refnorm``.
"""
from __future__ import annotations

import inspect
from typing import Callable, Mapping, Sequence

import numpy as np

from ... import registry
from . import _translate as T
from ...spec import REQUIRED
from .base import CONTRACTS, Call, Contract, Returned

DTYPES = ("float64", "float32", "float16", "bfloat16")
LOW = ("float16", "bfloat16")


def from_torch(fn, op: str, *, contract, reduction: str = "block", name: str | None = None, device: str = "cpu",
               param_dtype: str = "case", mask_dtype: str = "bool", signature: Sequence[str] | None = None,
               options=None, outputs: Sequence[str] | None = None, dtypes: Sequence[str] = DTYPES,
               supports: Callable[[Call], str | None] | None = None, backward: bool = True,
               not_computed: Mapping[str, str] | None = None) -> "TorchFunctionBackend":
    """A refnorm backend (base.py) running the torch callable or ``torch.autograd.Function`` ``fn`` as
    refnorm's ``op`` (module docstring). A bad argument is a ``ValueError``/``TypeError`` naming it."""
    return TorchFunctionBackend(fn, op, contract=contract, reduction=reduction, name=name, device=device,
                                param_dtype=param_dtype, mask_dtype=mask_dtype, signature=signature,
                                options=options, outputs=outputs, dtypes=dtypes, supports=supports,
                                backward=backward, not_computed=not_computed)


def _contract_of(value, reduction, where):
    if isinstance(value, Contract):
        return value
    if isinstance(value, str):
        if value == "exact":
            raise ValueError(f"{where}: contract 'exact' is refnorm's own rounded reference; a kernel declares "
                             "strict, stats_d or epi_d")
        if value not in CONTRACTS:
            from .base import parse_contract           # the one-line syntax: "rounds xhat=input, dy_xhat=input"
            try:
                return parse_contract(value, reduction)
            except ValueError as e:
                raise ValueError(f"{where}: contract {value!r}; expected one of strict, stats_d, epi_d, clauses such "
                                 "as 'rounds xhat=input, dy_xhat=input', a Contract, a mapping dtype -> contract, "
                                 f"or a function call -> Contract ({e})") from None
        return Contract(value, reduction)
    raise TypeError(f"{where}: contract {value!r} ({type(value).__name__}); expected one of strict, stats_d, "
                    "epi_d, a Contract, a mapping dtype -> contract, or a function call -> Contract")


class TorchFunctionBackend:
    """The backend ``from_torch`` makes (module docstring)."""

    def __init__(self, fn, op, *, contract, reduction="block", name=None, device="cpu", param_dtype="case",
                 mask_dtype="bool", signature=None, options=None, outputs=None, dtypes=DTYPES, supports=None,
                 backward=True, not_computed=None):
        import torch
        spec = registry.get(op)                                     # UnknownNameError naming the choices
        self.op, self.spec, self.device = op, spec, str(device)
        if isinstance(fn, type) and issubclass(fn, torch.autograd.Function):
            self.fn, is_function = fn.apply, True
        elif callable(fn):
            self.fn, is_function = fn, False
        else:
            raise TypeError(f"from_torch: fn {fn!r} is not callable (expected a torch callable or a "
                            "torch.autograd.Function subclass)")
        self.name = name or f"torch:{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', type(fn).__name__)}"
        if param_dtype not in ("case", "float32"):
            raise ValueError(f"from_torch: param_dtype {param_dtype!r}; expected 'case' or 'float32'")
        if mask_dtype not in ("bool", "case"):
            raise ValueError(f"from_torch: mask_dtype {mask_dtype!r}; expected 'bool' or 'case'")
        self.param_dtype, self.mask_dtype = param_dtype, mask_dtype
        bad = [d for d in dtypes if d not in DTYPES]
        if bad or not dtypes:
            raise ValueError(f"from_torch: dtypes {list(dtypes)!r}; expected a non-empty list of {', '.join(DTYPES)}")
        self.dtypes = tuple(dtypes)
        known = (*spec.inputs, *spec.options, *spec.state, "training")
        if signature is None:
            signature = (None if is_function else _named_inputs(self.fn, spec)) or spec.inputs
        self.signature = tuple(signature)
        if isinstance(options, Mapping):
            self.keywords = dict(options)
        elif options is not None:
            self.keywords = {k: k for k in options}
        else:
            self.keywords = {} if is_function else _accepted_options(self.fn, spec, self.signature)
        for k in (*self.signature, *self.keywords):
            if k not in known:
                raise ValueError(f"from_torch: {k!r} is not an input, option or state of {op} nor 'training'; "
                                 f"expected one of: {', '.join(known)}")
        dup = [k for k in self.signature if k in self.keywords]
        if dup or len(set(self.signature)) != len(self.signature):
            raise ValueError(f"from_torch: {dup or list(self.signature)} passed twice (signature and options)")
        missing = [k for k in spec.required if k not in self.signature and k not in self.keywords]
        if missing:
            raise ValueError(f"from_torch: the required input(s) {missing} of {op} are not passed to fn "
                             f"(signature={list(self.signature)}, options={self.keywords})")
        self.outputs = None if outputs is None else tuple(outputs)
        bad = [k for k in self.outputs or () if k not in spec.outputs]
        if bad or (self.outputs is not None and spec.outputs[0] not in self.outputs):
            raise ValueError(f"from_torch: outputs {list(self.outputs)!r}; {op}'s outputs are {list(spec.outputs)} "
                             f"and {spec.outputs[0]!r} must be one of them")
        if isinstance(contract, Mapping):
            self._contracts = {dt: _contract_of(c, reduction, f"from_torch: contract[{dt!r}]")
                               for dt, c in contract.items()}
            bad = [d for d in self._contracts if d not in DTYPES]
            if bad:
                raise ValueError(f"from_torch: contract for dtype(s) {bad}; expected {', '.join(DTYPES)}")
            self._contract = None
        elif callable(contract) and not isinstance(contract, (str, Contract)):
            self._contracts, self._contract = None, contract
        else:
            self._contracts, self._contract = None, _contract_of(contract, reduction, "from_torch")
        self._supports = supports
        self.forward_only = not backward
        self.not_computed = _not_computed(spec, not_computed)

    # ------------------------------------------------------------------ protocol
    def available(self) -> str | None:
        import torch
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            return "CUDA is not available on this machine (torch.cuda.is_available() is False)"
        return None

    def supports(self, call: Call) -> str | None:
        if call.op != self.op:
            return f"{self.name} implements {self.op} only"
        if call.dtype not in self.dtypes:
            return f"{self.name} handles {', '.join(self.dtypes)}, not {call.dtype}"
        if self._contracts is not None and call.dtype not in self._contracts:
            return f"{self.name} declares no contract for {call.dtype}"
        try:
            cfg = T.config(call.op, call.config)
        except KeyError as e:
            return str(e.args[0])
        passed = set(self.signature) | set(self.keywords)
        defaults = dict(self.spec.options)
        defaults = dict(self.spec.resolve(defaults)) if self.spec.resolve is not None else defaults
        for k, v in cfg.items():
            if k in passed:
                continue
            if defaults[k] is REQUIRED and k == "normalized_shape" and "x" in call.inputs:
                last = list(np.shape(call.inputs["x"])[-1:])
                if T.int_list(v) != last:
                    return (f"option normalized_shape={v!r} is not passed to {self.name} (from_torch signature/"
                            f"options), taken to normalize the last axis only ({last})")
                continue
            if defaults[k] is REQUIRED:
                return (f"option {k}={v!r}: {call.op} requires it, and it is not passed to {self.name} (from_torch "
                        "signature/options)")
            if not _same(v, defaults[k]):
                return (f"option {k}={v!r} is not passed to {self.name} (from_torch signature/options), which "
                        f"implements its default {defaults[k]!r} only")
        absent = [k for k in call.inputs if k not in passed]
        if absent:
            return f"input(s) {absent} are not passed to {self.name} (from_torch signature/options)"
        absent = [k for k in call.state if k not in passed]
        if absent:
            return f"state {absent} is not passed to {self.name} (from_torch signature/options)"
        return self._supports(call) if self._supports is not None else None

    def contract(self, call: Call) -> Contract:
        if self._contracts is not None:
            return self._contracts[call.dtype]
        if self._contract is not None and not isinstance(self._contract, Contract):
            c = self._contract(call)
            if not isinstance(c, Contract):
                raise TypeError(f"{self.name}: the contract function returned {c!r}; expected a Contract")
            return c
        return self._contract

    def run(self, call: Call) -> Returned:
        import torch

        from .torch_backend import _to_numpy, _to_torch, _torch_dtype
        cfg = T.start_run(self, call)
        act_dt = _torch_dtype(torch, call.dtype)
        par_dt = torch.float32 if (self.param_dtype == "float32" and call.dtype in LOW) else act_dt
        acts = T.ACTIVATIONS.get(call.op, ("x",))
        want_grad = bool(call.cotangents) and not self.forward_only
        values, leaves = {}, {}
        for k, a in call.inputs.items():
            if k in self.spec.masks:
                m = np.asarray(a)
                t = torch.from_numpy(np.array(m != 0 if m.dtype != np.bool_ else m, dtype=np.bool_))
                values[k] = t.to(self.device) if self.mask_dtype == "bool" else t.to(self.device, act_dt)
                continue
            t = _to_torch(torch, f"input {k!r}", a, act_dt if k in acts else par_dt, self.device)
            if want_grad:
                t.requires_grad_(True)
                leaves[k] = t
            values[k] = t
        state = {}
        for k, a in call.state.items():
            if k in self.spec.integer_state:
                state[k] = torch.tensor(np.asarray(a).astype(np.int64), device=self.device)
            else:
                state[k] = _to_torch(torch, f"state {k!r}", a, par_dt, self.device)
        values.update(state)
        for k, v in cfg.items():
            values[k] = tuple(int(s) for s in v) if k == "normalized_shape" and isinstance(v, (list, tuple)) \
                else tuple(v) if isinstance(v, list) else v
        values["training"] = bool(call.training)
        args = [values.get(k) for k in self.signature]
        kwargs = {kw: values.get(k) for k, kw in self.keywords.items()}
        with torch.enable_grad():
            try:
                res = self.fn(*args, **kwargs)
            except Exception as e:
                raise RuntimeError(f"{self.name} raised {type(e).__name__}: {e}") from e
            res = (res,) if isinstance(res, torch.Tensor) else tuple(res)
            names = self.outputs or [k for k in self.spec.outputs
                                     if f"output.{k}" not in self.not_computed][:len(res)]
            if len(res) != len(names) or not all(isinstance(r, torch.Tensor) for r in res):
                raise TypeError(f"{self.name} returned {len(res)} value(s) of type(s) "
                                f"{[type(r).__name__ for r in res]}; expected {len(names)} tensor(s) named "
                                f"{list(names)} (from_torch outputs=)")
            out = dict(zip(names, res))
            grads = self._grads(torch, call, cfg, out, leaves) if want_grad and self.spec.differentiable else {}
        new_state = {k: _to_numpy(torch, v) for k, v in state.items()}
        return Returned({k: _to_numpy(torch, v) for k, v in out.items()}, grads, new_state,
                        {k: why for k, why in self.not_computed.items() if k.startswith("output.")
                         or k[len("grad."):] in call.inputs})

    def _grads(self, torch, call, cfg, out, leaves) -> dict:
        """The gradients of ``leaves`` by autograd, from the cotangents of every flowing output, as NumPy
        arrays; the declared not-computed ones left out; an undeclared None is an error (module docstring)."""
        from .torch_backend import _to_numpy, _to_torch
        outs, cots = [], []
        for k in T.flowing_outputs(self.spec, cfg, call.cotangents, out):      # y first; add_norm's residual_out
            if k not in call.cotangents:
                raise KeyError(f"{call.op}: cotangents given without one for {k!r}")
            if not out[k].requires_grad:
                raise RuntimeError(f"{self.name}: output {k!r} does not require grad: fn is not differentiable by "
                                   "autograd (from_torch(..., backward=False) for a forward-only kernel)" if not outs
                                   else f"{self.name}: output {k!r} does not require grad, but its cotangent flows "
                                   "back (add_norm prenorm=True)")
            cot = _to_torch(torch, f"cotangent {k!r}", call.cotangents[k], out[k].dtype, self.device)
            if tuple(cot.shape) != tuple(out[k].shape):
                raise ValueError(f"{call.op}: cotangent {k!r} has shape {tuple(cot.shape)}; {self.name} "
                                 f"returned {k!r} of shape {tuple(out[k].shape)}")
            outs.append(out[k])
            cots.append(cot)
        names = [k for k in leaves if f"grad.{k}" not in self.not_computed]
        res = torch.autograd.grad(outs, [leaves[k] for k in names], cots, allow_unused=True)
        missing = [k for k, g in zip(names, res) if g is None]
        if missing:
            raise RuntimeError(f"{self.name}: autograd returned no gradient for input(s) {missing} (fn does not "
                               "compute them, or cuts them from the graph); a kernel that does not compute one "
                               f"declares it: from_torch(..., not_computed={{'grad.{missing[0]}': 'why'}}), and it "
                               "is reported unchecked with that reason")
        return {k: _to_numpy(torch, g) for k, g in zip(names, res)}


def _not_computed(spec, declared) -> dict:
    """``from_torch(not_computed=)`` checked: {"grad.NAME"|"output.NAME": non-empty reason}, NAME the
    op's input or a non-main output (ValueError naming the key otherwise)."""
    out = {}
    for key, why in dict(declared or {}).items():
        kind, _, name = str(key).partition(".")
        ok = name in spec.inputs if kind == "grad" else kind == "output" and name in spec.outputs[1:]
        if not ok:
            raise ValueError(f"from_torch: not_computed key {key!r}; expected 'grad.NAME' with NAME one of "
                             f"{', '.join(spec.inputs)} or 'output.NAME' with NAME one of "
                             f"{', '.join(spec.outputs[1:]) or '(none)'} ({spec.outputs[0]!r} is always computed)")
        if not isinstance(why, str) or not why.strip():
            raise ValueError(f"from_torch: not_computed[{key!r}] = {why!r}; expected a non-empty reason")
        out[key] = why
    return out


def _named_inputs(fn, spec) -> tuple | None:
    """The op's inputs that ``fn``'s leading positional parameters name, in ``fn``'s order, or None when
    its signature cannot be read, takes ``*args``, lacks a required input, or has another positional
    parameter without a default that is not an option it can take by keyword."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    P = inspect.Parameter
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == P.VAR_POSITIONAL for p in params):
        return None
    names = []
    for p in positional:
        if p.name not in spec.inputs:
            break
        names.append(p.name)
    rest = positional[len(names):]
    if not set(spec.required) <= set(names) or any(
            p.default is P.empty and (p.kind == P.POSITIONAL_ONLY or p.name not in (*spec.options, "training"))
            for p in rest):
        return None
    return tuple(names)


def _accepted_options(fn, spec, signature) -> dict:
    """The options of ``spec`` that ``fn`` takes as keywords (its own names), or {} when its signature
    cannot be read."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    ok = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {k: k for k in (*spec.options, "training") if k in params and params[k].kind in ok and k not in signature}


def _same(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(np.all(np.asarray(a, dtype=object) == np.asarray(b, dtype=object))) and np.shape(a) == np.shape(b)
    except Exception:                                                # noqa: BLE001
        return False
