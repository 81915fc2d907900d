"""Dropout keep-masks a backend drew itself (``Returned.masks``): validated, then judged against.

A kernel that draws its dropout keep-mask from a seed (flash-attention's fused add + LayerNorm draws it with
Philox inside the kernel) cannot use the mask a golden case supplies. It returns the mask it drew instead,
``Returned.masks[name]`` (the op's ``NormSpec.drawn_masks``: add_norm's ``mask`` for x and ``mask1`` for x1;
1 = kept, 0 = dropped; bool, integer or float), and the checker computes the reference with that mask in
place of the case's, so the kernel is judged on the mask it really used. The case's report says so
(``CaseResult.own_masks``, and its message). A mask is used only after these checks (``drawn_mask``); a
failed one makes the case an error with the reason:

1. the op lets a backend draw it, and the call has the input it drops (x1 for mask1);
2. its shape is that input's, and every value is 0 or 1;
3. its keep rate is consistent with the case's drop probability p. Under the hypothesis that each value is
   kept independently with probability q = 1 - p, the number kept K out of n is Binomial(n, q); the mask is
   refused when ``2 exp(-n KL(k || q))`` at the observed rate k = K / n (KL the Bernoulli relative entropy)
   is below ``ALPHA`` = 1e-9. exp(-n KL) is the Chernoff bound of the exact tail on the observed side
   (P(K >= observed) above the mean, P(K <= observed) below it), so a refusal needs that tail below
   ALPHA / 2, and a kernel that draws honestly has its mask refused with probability below ALPHA per mask
   (ALPHA / 2 per side). With p = 0 every value must be kept. What it catches: a mask that keeps everything
   (a kernel that skips dropout and says so) is refused at p = 0.5 from n = 31 values on, at p = 0.25 from
   n = 75; on smaller masks no test can tell it from a fair draw, and the verdict is then about the mask
   the kernel reported: its outputs are judged as the function of that mask.
"""
from __future__ import annotations

import math

import numpy as np

from .. import registry

ALPHA = 1e-9        # the false-alarm rate of the keep-rate test, per mask


def _kl(a: float, q: float) -> float:
    """The relative entropy KL(Bernoulli(a) || Bernoulli(q)), 0 log 0 = 0 (q in (0, 1))."""
    out = 0.0
    if a > 0:
        out += a * math.log(a / q)
    if a < 1:
        out += (1 - a) * math.log((1 - a) / (1 - q))
    return out


def keep_rate_bound(kept: int, n: int, p: float) -> float:
    """Twice the Chernoff bound of the probability that a fair dropout at drop probability ``p`` keeps a count
    at least as far from n (1 - p) as ``kept``, on its side (capped at 1; 0 for an impossible count)."""
    q = 1.0 - p
    if n == 0:
        return 1.0
    if q >= 1.0:
        return 1.0 if kept == n else 0.0
    return min(1.0, 2.0 * math.exp(-n * _kl(kept / n, q)))


def drawn_mask(step: int, op: str, config, inputs, name: str, mask) -> np.ndarray:
    """The mask ``name`` a backend returned for one call, checked (module docstring) and returned as a 0/1
    array in the dtype of the case's own mask (float64 when the case has none). Raises ValueError naming
    the mask and what was expected."""
    spec = registry.get(op)
    what = f"step {step}: the mask {name!r} the backend drew"
    if name not in spec.drawn_masks:
        raise ValueError(f"{what}: {op} has no mask a backend may draw; expected one of "
                         f"{', '.join(map(repr, spec.drawn_masks)) or 'none'}")
    target, option = spec.drawn_masks[name]
    if target not in inputs:
        raise ValueError(f"{what}: the call has no input {target!r} for it to drop")
    if not isinstance(mask, (np.ndarray, np.generic)):
        raise ValueError(f"{what} is a {type(mask).__name__}; expected a numpy.ndarray")
    mask = np.asarray(mask)
    shape = np.shape(inputs[target])
    if mask.shape != shape:
        raise ValueError(f"{what} has shape {mask.shape}; expected the shape of input {target!r}, {shape}")
    if mask.dtype.kind not in "biuf" and getattr(mask.dtype.type, "__module__", "") != "ml_dtypes":
        raise ValueError(f"{what} has dtype {mask.dtype}; expected bool, integer or float 0/1 values")
    m = mask.astype(np.float64)
    bad = ~((m == 0) | (m == 1))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what} holds {float(m[idx])!r} at {idx}; expected 0 (dropped) or 1 (kept)")
    p, n, kept = float(config[option]), int(m.size), int(np.count_nonzero(m))
    bound = keep_rate_bound(kept, n, p)
    if bound < ALPHA:
        raise ValueError(
            f"{what} keeps {kept} of {n} values ({kept / n:.4g}), inconsistent with {option}={p:g} (keep rate "
            f"{1 - p:g}): a fair draw keeps a count this far off with probability below {max(bound, 1e-300):.2g} "
            f"(< {ALPHA:g}, a binomial test); expected the mask the kernel really drew")
    own = inputs.get(name)
    return m if own is None else m.astype(np.asarray(own).dtype)


def drawn_masks(step: int, op: str, config, inputs, masks) -> dict:
    """Every mask of ``masks`` (name -> array, as returned) checked by ``drawn_mask``: {name: 0/1 array}."""
    if not hasattr(masks, "items"):
        raise ValueError(f"step {step}: the backend returned masks as a {type(masks).__name__}; expected a "
                         "mapping from mask name to array")
    return {k: drawn_mask(step, op, config, inputs, k, v) for k, v in masks.items()}
