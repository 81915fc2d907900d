"""The specification searched as a program (issue 33): which named intermediate a kernel rounds, and which
one operation of its backward a kernel writes otherwise.

A kernel that holds one intermediate in a lower precision (silu(z) stored in the input dtype before the
gate's product, the gain 1 + scale rounded before the multiply, a block scale kept in float16, the
variance truncated to bfloat16) computes the specification with that one value rounded. The search
needs no list of such points: every intermediate the specification names is one. Each module of
refnorm/specs is re-compiled from its own source with a hook after every assignment to a local name
(``v = ...`` becomes ``v = ...; v = _rp_hook("module:function.v", v)``, and ``from .other import f`` takes
``other``'s instrumented ``f``), so one evaluation can round exactly one named intermediate, wherever
it is computed (the forward, the backward, a shared helper of refnorm/specs/_math.py), and leave every
other value in float64.

``rounding_point(case, record)`` evaluates the instrumented specification once to learn the names the
call assigns (floating values only), then once per name and rounding: to the case dtype for a 16-bit
case, to bfloat16 and float16 for a float32 case, to float32 for a float64 case; to nearest even
(mechanism "precision"; "affine" for a value computed from the parameters alone, the gain 1 + scale:
the affine convention's cast order, as the catalogue's one_plus_in_d) and toward zero ("rounding"). A name explains the step when the result
reproduces every failing array within its bound and keeps every passing one within its own (the fit
of explain.fit_ratio); names of both roundings fitting alike are no answer. Cases up to
ROUNDING_SIZE elements of x (the search evaluates the specification about two times per name).

``mutation(case, record)``, where only gradients fail (the forward passes): every binary operation of the
specification (``a + b``, ``a - b``, ``a * b``, ``a / b``, wherever it is computed) is instrumented too, and
each is changed alone, as the issue's structured deviations: an operand dropped (a term of a sum left out,
a factor taken as 1, a divisor left out), a subtracted term added (its sign flipped), the second operand
doubled or halved. A change that reproduces every array of the step within its bound (the forward's
too: the change touches only what the backward computes, as silu'(z) formed beside the forward) names
the backward formula ("backward"; "gate" where the changed operand is a value of the gate input z alone,
silu(z) or its derivative: the gate's factor in the backward), with the operation's source line. Cases up to MUTATION_SIZE elements
of x (one evaluation per change, the first that fits ends the search).

Layer 4 (NumPy; reads the specifications' source, never changes them); thread-safe (the target is
thread-local, the instrumented modules are built once under a lock).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import operator
import threading

import ml_dtypes
import numpy as np

from .precision import round_toward_zero

ROUNDING_SIZE = 1 << 17          # elements of x up to which the rounding search runs
MUTATION_SIZE = 1 << 14          # and the mutation search (a few hundred evaluations at most)
_DT = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
_TARGET = threading.local()      # .t: None | ("record", names[, operations]) | ("round", keys, dtype, toward_zero)
#                                    | ("mutate", operation, change)
_LOCK = threading.RLock()
_BUILT: dict = {}
# the inputs that are affine parameters (or their per-sample modulation): a value computed from these alone
PARAMETERS = ("weight", "bias", "weight1", "bias1", "scale", "shift", "alpha", "gamma", "beta")


def _round(v, dt, toward_zero):
    """v (a float or float array) rounded to ``dt``, to nearest even or toward zero; back in float64."""
    a = np.asarray(v, dtype=np.float64)
    out = round_toward_zero(a, dt) if toward_zero else np.asarray(a.astype(dt), dtype=np.float64)
    return float(out) if isinstance(v, float) else out


def _floating(v) -> bool:
    return (isinstance(v, float) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")) and np.size(v) > 0


def _rp_hook(key, value):
    t = getattr(_TARGET, "t", None)
    if t is None or not _floating(value):
        return value
    if t[0] == "record":
        t[1].setdefault(key, np.array(value, dtype=np.float64))
        return value
    return _round(value, t[2], t[3]) if t[0] == "round" and key in t[1] else value


_OPS = {"Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv}
# the changes of one operation (module docstring): name -> (applies to, new value of (a, b), what it says)
CHANGES = {
    "drop_left": (("Add", "Sub", "Mult"), lambda a, b, op: b if op != "Sub" else -b, "{l} left out"),
    "drop_right": (("Add", "Sub", "Mult", "Div"), lambda a, b, op: a, "{r} left out"),
    "flip": (("Add", "Sub"), lambda a, b, op: a - b if op == "Add" else a + b, "the sign of {r} flipped"),
    "double": (("Add", "Sub", "Mult", "Div"), lambda a, b, op: _OPS[op](a, 2 * b), "{r} doubled"),
    "halve": (("Add", "Sub", "Mult", "Div"), lambda a, b, op: _OPS[op](a, 0.5 * b), "{r} halved"),
    "times": (("Div",), lambda a, b, op: a * b, "{r} multiplied where it divides"),
}
_SOURCES: dict = {}              # operation id -> (module, function, line, op, left source, right source)


def _rp_bin(i, a, b, op):
    t = getattr(_TARGET, "t", None)
    if t is None or t[0] != "mutate":
        if t is not None and t[0] == "record" and len(t) > 2:
            t[2].setdefault(i, None)
        return _OPS[op](a, b)
    return CHANGES[t[2]][1](a, b, op) if i == t[1] else _OPS[op](a, b)


class _Instrument(ast.NodeTransformer):
    """After each assignment to local names inside a function, ``name = _rp_hook(key, name)``; a relative
    import of a sibling specification module takes its instrumented namespace."""

    def __init__(self, module, source):
        self.module, self.funcs, self.source = module, [], source

    def visit_BinOp(self, node):
        op = type(node.op).__name__
        seg = (ast.get_source_segment(self.source, node.left) or "a", ast.get_source_segment(self.source, node.right)
               or "b")
        self.generic_visit(node)
        if not self.funcs or op not in _OPS:
            return node
        i = len(_SOURCES)
        _SOURCES[i] = (self.module, self.funcs[-1], node.lineno, op) + seg
        return ast.Call(ast.Name("_rp_bin", ast.Load()), [ast.Constant(i), node.left, node.right, ast.Constant(op)], [])

    def visit_FunctionDef(self, node):
        self.funcs.append(node.name)
        self.generic_visit(node)
        self.funcs.pop()
        return node

    def _hooks(self, node, targets):
        if not self.funcs:
            return node
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        key = f"{self.module}:{self.funcs[-1]}."
        return [node] + [ast.parse(f"{n} = _rp_hook({key + n!r}, {n})").body[0] for n in dict.fromkeys(names)]

    def visit_Assign(self, node):
        self.generic_visit(node)
        return self._hooks(node, node.targets)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        return self._hooks(node, [node.target])

    def visit_ImportFrom(self, node):
        if node.level != 1 or not node.module:
            return node
        return [ast.parse(f"{a.asname or a.name} = _rp_module({node.module!r}).{a.name}").body[0] for a in node.names]


class _Namespace:
    def __init__(self, d):
        self.__dict__.update(d)


def _rp_module(name):
    """The instrumented namespace of refnorm.specs.<name> (built once)."""
    with _LOCK:
        if name not in _BUILT:
            mod = importlib.import_module(f"refnorm.specs.{name}")
            src = inspect.getsource(mod)
            tree = _Instrument(name, src).visit(ast.parse(src))
            ast.fix_missing_locations(tree)
            ns = {"__name__": f"refnorm.specs.{name}", "__package__": "refnorm.specs", "_rp_hook": _rp_hook,
                  "_rp_module": _rp_module, "_rp_bin": _rp_bin}
            exec(compile(tree, mod.__file__, "exec"), ns)      # noqa: S102 - the project's own specification
            _BUILT[name] = _Namespace(ns)
        return _BUILT[name]


def _evaluate(case, record, target, inputs=None):
    from .. import registry
    ns = _rp_module(case.op)
    _TARGET.t = target
    try:
        with np.errstate(all="ignore"):
            return registry.evaluate(case.op, {k: np.asarray(v) for k, v in (inputs or record.inputs).items()},
                                     config=dict(case.config),
                                     grad_outputs={k: np.asarray(v, np.float64) for k, v in record.cotangents.items()}
                                     or None,
                                     state={k: np.asarray(v, np.float64) for k, v in record.state.items()},
                                     training=record.training, engine=(ns.forward, ns.backward))
    finally:
        _TARGET.t = None


def _dtypes(case_dtype):
    if case_dtype in ("float16", "bfloat16"):
        return (case_dtype,)
    return ("bfloat16", "float16") if case_dtype == "float32" else ("float32",)


def _fits(record, res, fit_ratio):
    """Whether ``res`` reproduces every compared array of the step within its bound."""
    for part in ("outputs", "grads", "state"):
        for name in record.compare[part]:
            got, alt, E = record.got[part].get(name), getattr(res, part).get(name), record.E[part].get(name)
            if got is None or E is None:
                continue
            if alt is None or np.shape(alt) != np.shape(got) or fit_ratio(got, alt, E) > 1:
                return False
    return True


def rounding_point(case, record, fit_ratio):
    """The named intermediate whose rounding reproduces the step (module docstring): an explanation
    {"mechanism", "text"}, or None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > ROUNDING_SIZE or not record.failing or not importlib.util.find_spec(
            f"refnorm.specs.{case.op}"):
        return None
    seen = {}
    try:
        _evaluate(case, record, ("record", seen))
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return None
    # each name alone, and each local name the forward and the backward both assign (a value a kernel
    # holds in one dtype wherever it computes it: the gain 1 + scale, silu(z))
    by_name = {}
    for key in seen:
        by_name.setdefault(key.rsplit(".", 1)[1], []).append(key)
    points = [(key,) for key in seen] + [tuple(ks) for ks in by_name.values() if len(ks) > 1]
    found = []
    for keys in points:
        for dt in _dtypes(case.dtype):
            for toward_zero in (False, True):
                try:
                    res = _evaluate(case, record, ("round", frozenset(keys), _DT[dt], toward_zero))
                except Exception:                       # noqa: BLE001 - a rounding the spec cannot go on from
                    continue
                if _fits(record, res, fit_ratio):
                    found.append((keys, dt, toward_zero))
    if not found or len({tz for _, _, tz in found}) > 1:
        return None
    keys, dt, tz = found[0]
    # a value computed from the parameters alone (the gain 1 + scale) does not move with the activations
    # (every input but the affine parameters): rounding it is the affine convention's cast order
    still = _unmoved(case, record, seen, [k for k in record.inputs if k not in PARAMETERS])
    mod = keys[0].split(":", 1)[0]
    what = " and ".join(k.split(":", 1)[1] for k in keys)
    more = (f" (also: {', '.join(' and '.join(k.split(':', 1)[1] for k in ks) for ks, _, _ in found[1:4])})"
            if len(found) > 1 else "")
    return {"mechanism": "rounding" if tz else "affine" if set(keys) <= still else "precision",
            "text": f"the specification with its intermediate {what} (refnorm/specs/{mod}.py) rounded "
                    f"{'toward zero' if tz else 'to nearest'} to {dt} reproduces every failing array{more}"}


def _unmoved(case, record, base, names):
    """The keys of ``base`` (a recording of the call) whose values stay the same when the floating inputs
    ``names`` are moved (x -> 0.75 x + 0.125): the values that do not depend on those inputs."""
    ins = {k: (np.asarray(v, dtype=np.float64) * 0.75 + 0.125).astype(np.asarray(v).dtype)
           if k in names and np.asarray(v).dtype.kind not in "iub" else v       # (bfloat16's kind is V)
           for k, v in record.inputs.items()}
    got = {}
    try:
        _evaluate(case, record, ("record", got), ins)
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return set()
    return {k for k, v in base.items() if k in got and np.shape(got[k]) == np.shape(v)
            and np.array_equal(got[k], v, equal_nan=True)}


def _gate_values(case, record):
    """The local names whose values follow the gate input z alone (they move with z, not with x): silu(z) and
    its derivative. A change of the backward in one of them is the gate's factor (mechanism "gate")."""
    base = {}
    _evaluate(case, record, ("record", base))
    keys = _unmoved(case, record, base, ["x"]) - _unmoved(case, record, base, ["z"])
    return {k.rsplit(".", 1)[1] for k in keys}


def mutation(case, record, fit_ratio):
    """One operation of the specification changed (module docstring) reproducing a step where only
    gradients fail: an explanation {"mechanism": "backward", "text"}, or None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > MUTATION_SIZE or not record.failing or any(p != "grads" for p, _ in record.failing) \
            or not importlib.util.find_spec(f"refnorm.specs.{case.op}"):
        return None
    ops = {}
    try:
        _evaluate(case, record, ("record", {}, ops))
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return None
    for i in ops:
        mod, func, line, op, left, right = _SOURCES[i]
        for change, (applies, _, what) in CHANGES.items():
            if op not in applies:
                continue
            try:
                res = _evaluate(case, record, ("mutate", i, change))
            except Exception:                           # noqa: BLE001 - a change the spec cannot go on from
                continue
            if _fits(record, res, fit_ratio):
                sym = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/"}[op]
                changed = left if change == "drop_left" else right
                gate = _gate_values(case, record) & {n.id for n in ast.walk(ast.parse(changed, mode="eval"))
                                                     if isinstance(n, ast.Name)} if "z" in record.inputs else set()
                return {"mechanism": "gate" if gate else "backward",
                        "text": f"the specification with {what.format(l=f'`{left}`', r=f'`{right}`')} in "
                                f"`{left} {sym} {right}` ({func}, refnorm/specs/{mod}.py line {line}) reproduces "
                                "every failing gradient"}
    return None
