"""Contracts as rounding points: the names a contract may use, the presets as lists of them, the
readable one-line syntax, and the check of a contract against one op (docs/tolerances.md, "Contracts as
rounding points").

A contract (``backends.base.Contract``) names the intermediates of the op's specification a kernel
rounds (``rounds``: point -> dtype), the reductions it accumulates otherwise than the default
(``acc``: reduction -> (dtype, order, block)) and the values its backward recomputes from a stored,
rounded one (``recompute``: point -> source). A dtype is "input" (the case dtype), "float16",
"bfloat16" or "float32".

Rounding points (ROUND_POINTS, per op in OP_POINTS):
    mean, rstd     the saved statistics (mean: layer_norm-like ops; rstd: all; the variance about a
                   rounded mean is the mean's rounding too)
    xhat           x_hat = (x - mean) * rstd, as the affine product and the backward use it
    xhat_w         x_hat * w, the affine product before the bias (a quantizer's input with no bias)
    g              the backward's g = dy * w
    dy_xhat        the backward's dy * x_hat, the terms of dweight's sum
    dx_terms       dx's pointwise terms r * g, r * x_hat * c1 (rounded each before the difference)
    residual_out   add_norm's residual sum s = x + residual, rounded before the norm reads it
Reductions (REDUCTION_POINTS): mean, var (the variance or mean square), dweight, dbias (the parameter
gradients' partial sums over the rows), dx_sums (the backward's row sums mean(g), mean(g x_hat)).
Recompute: {"xhat": "residual_out"}: the backward recomputes x_hat from the stored (rounded)
residual_out; add_norm only. {"xhat": "saved_stats"}: the backward forms x_hat per element, before any
sum, from the mean and rstd the kernel returns (its saved statistics, exactly the values returned: a
statistic rounded to float16 before it is saved is read back rounded); layer_norm and rms_norm: their
backward is judged at those statistics (bounds/saved.py; docs/tolerances.md, "Saved statistics");
add_norm returns no statistics, so it cannot declare it.

The one-line syntax (``backends.base.parse_contract``, ``describe``; ``--backend-option contract=...``): a preset name
("strict", "stats_d", "epi_d", optionally "/tree" etc. for its reduction), or clauses separated by ";":
    rounds xhat=input, dy_xhat=input; acc dweight=float16/serial/128; recompute xhat=residual_out;
    reduction block
    preset stats_d; recompute xhat=saved_stats        (torch CPU's float16 layer_norm, say)
(an acc value is dtype[/order[/block]]; a clause "preset stats_d" starts from a preset's lists).
"""
from __future__ import annotations

from typing import Mapping

from ..errors import ConfigError

ROUND_DTYPES = ("input", "float16", "bfloat16", "float32")
ORDERS = ("tree", "block", "serial")
ROUND_POINTS = ("mean", "rstd", "xhat", "xhat_w", "g", "dy_xhat", "dx_terms", "residual_out")
REDUCTION_POINTS = ("mean", "var", "dweight", "dbias", "dx_sums")
RECOMPUTE = {"xhat": ("residual_out", "saved_stats")}
SAVED = "saved_stats"             # a recompute source that is the kernel's returned statistics, not a rounded point

_NORM = ("rstd", "xhat", "xhat_w", "g", "dy_xhat", "dx_terms")
# the ops whose bounds add the terms of any list of points (bounds/points.py); every op takes the presets
OP_POINTS = {
    "layer_norm": {"rounds": ("mean",) + _NORM, "acc": REDUCTION_POINTS, "recompute": ("xhat=saved_stats",)},
    "rms_norm": {"rounds": _NORM, "acc": ("var", "dweight", "dbias", "dx_sums"), "recompute": ("xhat=saved_stats",)},
    "add_norm": {"rounds": ("mean",) + _NORM + ("residual_out",), "acc": REDUCTION_POINTS,
                 "recompute": ("xhat=residual_out",)},
    # forward only: the points before the quantizer (its input: xhat_w plus the bias, or y)
    "norm_quant": {"rounds": ("mean", "rstd", "xhat", "xhat_w"), "acc": ("mean", "var"), "recompute": ()},
}


class Points(dict):
    """A read-only-by-convention mapping with a hash (a frozen Contract's fields)."""

    def __hash__(self):
        return hash(tuple(sorted(self.items())))


def _acc_spec(k, v):
    """(dtype, order, block) of one reduction's entry; a ConfigError naming it when malformed."""
    if isinstance(v, str) or v is None:
        v = (v, None, None)
    v = tuple(v) + (None,) * (3 - len(tuple(v)))
    if len(v) != 3:
        raise ConfigError(f"contract acc[{k!r}]={v!r}: expected (dtype, order, block)")
    dt, order, block = v
    if dt is not None and dt not in ROUND_DTYPES:
        raise ConfigError(f"contract acc[{k!r}]: dtype {dt!r}; expected one of {', '.join(ROUND_DTYPES)}")
    if order is not None and order not in ORDERS:
        raise ConfigError(f"contract acc[{k!r}]: order {order!r}; expected one of {', '.join(ORDERS)}")
    if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
        raise ConfigError(f"contract acc[{k!r}]: block {block!r}; expected a positive integer or None")
    return (dt, order, block)


PRESETS = {
    "strict": ({}, {}, {}),
    "stats_d": ({"mean": "input", "rstd": "input"},
                {"dweight": ("input", None, None), "dbias": ("input", None, None)}, {}),
}
PRESETS["epi_d"] = ({**PRESETS["stats_d"][0], "xhat": "input", "xhat_w": "input", "g": "input",
                     "dy_xhat": "input", "dx_terms": "input"}, dict(PRESETS["stats_d"][1]), {})
ORDER = ("epi_d", "stats_d", "strict")          # largest first


def _check_names(rounds, accs, recompute):
    for k, v in rounds.items():
        if k not in ROUND_POINTS:
            raise ConfigError(f"contract rounds: unknown point {k!r}; the points: {', '.join(ROUND_POINTS)}")
        if v not in ROUND_DTYPES:
            raise ConfigError(f"contract rounds[{k!r}]: dtype {v!r}; expected one of {', '.join(ROUND_DTYPES)}")
    for k in accs:
        if k not in REDUCTION_POINTS:
            raise ConfigError(f"contract acc: unknown reduction {k!r}; the reductions: {', '.join(REDUCTION_POINTS)}")
    for k, v in recompute.items():
        if k not in RECOMPUTE:
            raise ConfigError(f"contract recompute: unknown point {k!r}; expected one of {', '.join(RECOMPUTE)}")
        if v not in RECOMPUTE[k]:
            raise ConfigError(f"contract recompute[{k!r}]: source {v!r}; expected one of {', '.join(RECOMPUTE[k])}")
        if v != SAVED and rounds.get(v) is None:
            raise ConfigError(f"contract recompute[{k!r}]={v!r}: {v} is not declared rounded (rounds[{v!r}]); "
                              "recomputing from an exact value is the strict arithmetic")


def _contains(big, small) -> bool:
    return all(k in big[0] and big[0][k] == v for k, v in small[0].items()) and \
        all(k in big[1] and big[1][k] == v for k, v in small[1].items())


def normalize(kind, rounds, recompute, accs):
    """(kind, rounds, recompute, accs) of a Contract: the preset's lists filled in when only ``kind`` is
    given; ``kind`` set to the preset the lists equal or the largest they contain."""
    if kind == "exact":
        if rounds or recompute or accs:
            raise ConfigError("contract 'exact' (refnorm's own rounded reference) takes no rounding points")
        return kind, Points(), Points(), Points()
    given = rounds is not None or accs is not None or recompute is not None
    if not given:
        r, a, c = PRESETS[kind]
    else:
        base = PRESETS[kind] if kind != "strict" else ({}, {}, {})
        r = {**base[0], **dict(rounds or {})}
        a = {**base[1], **dict(accs or {})}
        c = dict(recompute or {})
    if not isinstance(r, Mapping) or not isinstance(a, Mapping) or not isinstance(c, Mapping):
        raise ConfigError("contract rounds, acc and recompute: expected mappings")
    a = {k: _acc_spec(k, v) for k, v in a.items()}
    _check_names(r, a, c)
    for name in ORDER:
        if _contains((r, a), PRESETS[name]):
            kind = name
            break
    return kind, Points(r), Points(c), Points(a)


def extras(contract):
    """(rounds, accs, recompute) the contract declares beyond its preset ``kind``."""
    if contract.kind == "exact":
        return {}, {}, {}
    pr, pa, _ = PRESETS[contract.kind]
    r = {k: v for k, v in contract.rounds.items() if pr.get(k) != v}
    a = {k: v for k, v in contract.accs.items() if pa.get(k) != v}
    return r, a, dict(contract.recompute)


def describe(contract) -> str:
    """One readable line (module docstring): "strict/block" for a preset, else the clauses."""
    if not contract.custom:
        return f"{contract.kind}/{contract.reduction}"
    r, a, _ = extras(contract)
    if not r and not a and contract.kind != "strict":     # a preset and a recompute: "preset stats_d; recompute ..."
        parts = [f"preset {contract.kind}"]
    else:
        parts = ["rounds " + ", ".join(f"{k}={v}" for k, v in contract.rounds.items())] if contract.rounds else []
        if contract.accs:
            parts.append("acc " + ", ".join(f"{k}={_acc_text(v)}" for k, v in contract.accs.items()))
    if contract.recompute:
        parts.append("recompute " + ", ".join(f"{k}={v}" for k, v in contract.recompute.items()))
    parts.append(f"reduction {contract.reduction}")
    if contract.acc:
        parts.append(f"accumulate {contract.acc}")
    return "; ".join(parts)


def _acc_text(v):
    """dtype[/order[/block]] of an acc entry (None parts as "default")."""
    dt, order, block = v
    out = dt or "default"
    if order or block:
        out += f"/{order or 'default'}"
    if block:
        out += f"/{block}"
    return out


def _pairs(text, clause):
    out = {}
    for item in (t.strip() for t in text.replace(",", " ").split()):
        if not item:
            continue
        if "=" not in item:
            raise ConfigError(f"contract clause {clause!r}: {item!r}; expected name=value")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def parse_fields(text: str, reduction: str = "block") -> dict:
    """The keyword arguments of the Contract a one-line string declares (module docstring; ``Contract``
    itself: ``backends.base.parse_contract``); a ConfigError naming the bad part."""
    text = str(text).strip()
    if not text:
        raise ConfigError("contract '': expected a preset (strict, stats_d, epi_d) or clauses such as "
                          "'rounds xhat=input, dy_xhat=input'")
    if ";" not in text and " " not in text and "=" not in text:
        name, _, red = text.partition("/")
        if name not in PRESETS:
            raise ConfigError(f"contract {text!r}: expected a preset (strict, stats_d, epi_d) or clauses such as "
                              "'rounds xhat=input, dy_xhat=input'")
        return {"kind": name, "reduction": red or reduction}
    kind, rounds, accs, recompute, acc = "strict", {}, {}, {}, None
    for clause in (c.strip() for c in text.split(";")):
        if not clause:
            continue
        word, _, rest = clause.partition(" ")
        if word == "preset":
            kind = rest.strip()
            if kind not in PRESETS:
                raise ConfigError(f"contract clause {clause!r}: preset {kind!r}; expected {', '.join(PRESETS)}")
        elif word == "rounds":
            rounds.update(_pairs(rest, clause))
        elif word == "recompute":
            recompute.update(_pairs(rest, clause))
        elif word == "acc":
            for k, v in _pairs(rest, clause).items():
                bits = v.split("/")
                dt = None if bits[0] in ("", "default") else bits[0]
                order = bits[1] if len(bits) > 1 and bits[1] not in ("", "default") else None
                try:
                    block = int(bits[2]) if len(bits) > 2 and bits[2] else None
                except ValueError:
                    raise ConfigError(f"contract clause {clause!r}: block {bits[2]!r}; expected an integer") from None
                accs[k] = (dt, order, block)
        elif word == "reduction":
            reduction = rest.strip()
        elif word == "accumulate":
            acc = rest.strip()
        else:
            raise ConfigError(f"contract clause {clause!r}: expected one starting with preset, rounds, acc, "
                              "recompute, reduction or accumulate")
    if accs and acc:
        raise ConfigError(f"contract {text!r}: give either 'accumulate DTYPE' (every reduction's default) or "
                          "per-reduction 'acc' entries, not both")
    return {"kind": kind, "reduction": reduction, "acc": accs or acc, "rounds": rounds, "recompute": recompute}


def plain_statistics(contract) -> bool:
    """Whether ``contract`` declares its statistics as plain two-pass sums: acc entries for both "mean" and
    "var" with an order and the float32 (or default) accumulation dtype. A Welford or merge-based kernel must
    not declare them (its mean errs like a sum of |x|, where a plain sum of few-bit inputs is exact)."""
    a = contract.accs
    return all(k in a and a[k][1] is not None and a[k][0] in (None, "float32") for k in ("mean", "var"))


def saved_statistics(contract) -> bool:
    """Whether ``contract`` declares that its backward forms x_hat from the statistics it returns
    (``recompute xhat=saved_stats``): its gradients are then judged at those statistics (bounds/saved.py)."""
    return getattr(contract, "recompute", None) is not None and contract.recompute.get("xhat") == SAVED


def relaxes(contract) -> bool:
    """Whether ``contract`` declares any rounding or low-precision accumulation beyond strict (Contract.relaxed):
    judging the backward at the kernel's own statistics (saved_statistics) rounds nothing."""
    recompute = {k: v for k, v in contract.recompute.items() if v != SAVED}
    return contract.kind in ("stats_d", "epi_d") or bool(contract.rounds or contract.accs or recompute)


def validate(op: str, contract) -> None:
    """A ConfigError naming the first point ``contract`` declares that ``op`` has no bound for, with the
    op's valid points; presets are valid for every op."""
    if contract.kind == "exact" or not contract.custom:
        return
    pts = OP_POINTS.get(op)
    if pts is None:
        raise ConfigError(f"{op}: a contract beyond the presets ({describe(contract)}) is derived for "
                          f"{', '.join(OP_POINTS)} only; {op} takes strict, stats_d or epi_d")
    r, a, c = extras(contract)
    for k in r:
        if k not in pts["rounds"]:
            raise ConfigError(f"{op}: contract rounds point {k!r} is not one of {op}'s: {', '.join(pts['rounds'])}")
    for k in a:
        if k not in pts["acc"]:
            raise ConfigError(f"{op}: contract acc reduction {k!r} is not one of {op}'s: {', '.join(pts['acc'])}")
    for k, v in c.items():
        if f"{k}={v}" not in pts["recompute"]:
            raise ConfigError(f"{op}: contract recompute {k}={v}: not derived for {op} "
                              f"(valid: {', '.join(pts['recompute']) or 'none'})")
