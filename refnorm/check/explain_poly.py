"""poly_norm's powers normalized otherwise, or its backward's chain at other values: explanations of a failing
step by the specification's arithmetic (issue 33), under explain.py's rule (an explanation reproduces every
failing array it names within the check's own bound, and the reference itself does not).

PolyNorm (refnorm/specs/poly_norm.py): y = w0 h_3 + w1 h_2 + w2 h_1 + bias, h_p = x^p r_p, r_p = (mean_H(x^2p)
+ eps)^(-1/2). The forward's deviations, each reproducing every failing output (the gradients are the
kernel's own forward's: explained with it, as explain.py's fused activation):

* one rms for every power (r_3, r_2 or r_1 for all three), one power not normalized (h_p = x^p), one power's
  term computed from another power (h_q in place of h_p: its register loaded with x^q), the powers
  of the normalized x (h_p = x_hat^p, x_hat = x r_1), each power normalized as a LayerNorm (its row mean
  subtracted, divided by its standard deviation): another equation, "semantics" (rule 16 of
  docs/verdicts.md's "Which mechanism a bug is");
* eps in one power's normalization alone, or left out of one, or added inside the root of the max-rescaled
  mean square (an effective eps max|x^p|^2) ("eps", rule 6);
* the scalar bias added to each of the three terms (3 bias), or inside one term's product (w_k (h_p + bias));
  each weight folded into its power before the normalization (norm(w_k x^p), about sign(w_k) h_p): "affine"
  (rule 13).

Where only gradients fail, the backward's deviations (mechanism "backward", rule 15), each dx by the
specification's formula otherwise evaluated: one saved rstd (x's, r_1) for every power, h_p recomputed as
x^p r_1; the chain factor p x^(p - 1) evaluated at the normalized x (x r_1) instead of x; one power's term
left out of dx (a loop over the powers stopping early); the chain factor p x^p (the power not decremented);
one power's chain factor read from another power's register (q x^(q - 1), or p times it: 3 (2 x) for 3 x^2);
each power's projection on the power before its normalization (mean(g_p x^p), or x^p multiplying it).
Where only dbias fails: 3 sum(dy), the bias's sum accumulated once per power term (reduction, rule 11).

Layer 4 (NumPy; the specification's own helpers).
"""
from __future__ import annotations

import numpy as np

from ..specs.poly_norm import POWERS, poly_norm_backward, rms_normalize


def _terms(x, weight, bias, hs):
    y = weight[0] * hs[0] + weight[1] * hs[1] + weight[2] * hs[2]
    return y if bias is None else y + float(np.reshape(bias, ()))


def _forward_variants(x, weight, bias, eps):
    """(y, what, mechanism) for each forward deviation (module docstring)."""
    us = [x ** p for p in POWERS]
    own = [rms_normalize(u, eps) for u in us]
    out = []
    for j, p in enumerate(POWERS):
        r = own[j][1]
        out.append((_terms(x, weight, bias, [u * r for u in us]), f"one rms, that of x^{p}, for every power",
                    "semantics"))
    for j, p in enumerate(POWERS):          # one power's normalization left out (its term x^p as it is)
        out.append((_terms(x, weight, bias, [us[k] if k == j else own[k][0] for k in range(3)]),
                    f"the x^{p} term not normalized (x^{p} taken as already normalized, r_{p} = 1)", "semantics"))
    for j, p in enumerate(POWERS):          # one power's mean square accumulated from x^p times another power
        for k, q in enumerate(POWERS):      # (the other register squared into it): r_p = (mean(x^p x^q) + eps)^-1/2
            if k != j:
                with np.errstate(all="ignore"):
                    r = 1.0 / np.sqrt((us[j] * us[k]).mean(axis=-1, keepdims=True) + eps)
                out.append((_terms(x, weight, bias, [us[j] * r if i == j else own[i][0] for i in range(3)]),
                            f"the x^{p} term's mean square accumulated as mean(x^{p} * x^{q}) (x^{q}'s register where "
                            f"x^{p}'s belongs), r_{p} = (mean(x^{p + q}) + eps)^(-1/2)", "semantics"))
    if eps > 0:                             # eps in one power's normalization alone, or left out of one
        bare = [rms_normalize(u, 0.0)[0] for u in us]
        for j, p in enumerate(POWERS):
            out.append((_terms(x, weight, bias, [own[k][0] if k == j else bare[k] for k in range(3)]),
                        f"eps only in the x^{p} term's normalization (the other powers' rms without eps)", "eps"))
            out.append((_terms(x, weight, bias, [bare[k] if k == j else own[k][0] for k in range(3)]),
                        f"eps left out of the x^{p} term's normalization", "eps"))
    if eps > 0:                             # eps inside the root of the max-rescaled mean, m sqrt(mean((u / m)^2) + eps)
        m2 = [np.max(np.abs(u), axis=-1, keepdims=True) ** 2 for u in us]
        out.append((_terms(x, weight, bias, [rms_normalize(u, eps * m)[0] for u, m in zip(us, m2)]),
                    "eps added inside the root of each power's max-rescaled mean square, m sqrt(mean((x^p / m)^2) + "
                    "eps) with m = max |x^p| (an effective eps m^2)", "eps"))
    for j, p in enumerate(POWERS):          # one power's register loaded with another power (x^q for x^p)
        for k, q in enumerate(POWERS):
            if k != j:
                out.append((_terms(x, weight, bias, [own[k][0] if i == j else own[i][0] for i in range(3)]),
                            f"the x^{p} term computed from x^{q} (its power's register loaded with x^{q}: h_{q} in "
                            f"place of h_{p})", "semantics"))
    xh = own[2][0]
    out.append((_terms(x, weight, bias, [xh ** p for p in POWERS]), "the powers of the normalized x (x_hat^p, x_hat "
                "= x / rms(x)) in place of each power divided by its own rms", "semantics"))
    A = (x.ndim - 1,)
    cen = [(u - u.mean(axis=A, keepdims=True)) / np.sqrt(u.var(axis=A, keepdims=True) + eps) for u in us]
    out.append((_terms(x, weight, bias, cen), "each power normalized as a LayerNorm (its row mean subtracted, "
                "divided by its standard deviation) in place of its rms", "semantics"))
    # each weight folded into its power before the normalization, norm(w_k x^p): its magnitude cancelled by
    # the power's own rms, only its sign kept
    out.append((_terms(x, np.ones(3), bias, [rms_normalize(w * u, eps)[0] for w, u in zip(weight, us)]),
                "each weight folded into its power before the normalization, norm(w x^p) (its magnitude cancelled "
                "by the rms: sign(w) h_p)", "affine"))
    if bias is not None:
        out.append((_terms(x, weight, None, [h for h, _ in own]) + 3.0 * float(np.reshape(bias, ())),
                    "the bias added to each of the three power terms (3 bias)", "affine"))
        for k, p in enumerate(POWERS):          # the bias inside one term's product: w_k (h_p + bias)
            out.append((_terms(x, weight, None, [h for h, _ in own]) + weight[k] * float(np.reshape(bias, ())),
                        f"the bias inside the x^{p} term's product, w{k} (h_{p} + bias)", "affine"))
    return out


def _backward_variants(x, dy, weight, eps, bias_shape):
    """(dx, what) for each backward deviation (module docstring)."""
    us = [x ** p for p in POWERS]
    own = [rms_normalize(u, eps) for u in us]
    r1 = own[2][1]
    one = poly_norm_backward(dy, x, [u * r1 for u in us], [r1] * 3, weight, bias_shape)[0]
    A = (dy.ndim - 1,)
    xn = x * r1
    dx, terms, dus = np.zeros_like(x), [], []
    for k, p in enumerate(POWERS):
        h, r = own[k]
        g = dy * weight[k]
        du = r * (g - h * (g * h).sum(axis=A, keepdims=True) / dy.shape[-1])
        dx = dx + (du if p == 1 else p * xn ** (p - 1) * du)
        terms.append(du if p == 1 else p * x ** (p - 1) * du)
        dus.append(du)
    factor = {q: np.ones_like(x) if q == 1 else q * x ** (q - 1) for q in POWERS}
    swapped = []                            # one power's chain factor from another's register (3 (2 x) for 3 x^2)
    for k, p in enumerate(POWERS):
        for q in (q for q in POWERS if q != p):
            for f, how in ((factor[q], f"x^{q}'s, {_factor(q)}"), (p * factor[q], f"{p} times x^{q}'s ({p} "
                                                                             f"{_factor(q)})")):
                if p == 1 and how.startswith("1 times"):
                    continue
                d = sum(t for j, t in enumerate(terms) if j != k) + f * dus[k]
                swapped.append((d, f"x^{p}'s chain factor {_factor(p)} read as {how} (another power's register)"))
    xp = sum(t * (x if p > 1 else p * x) for t, p in zip(terms, POWERS))      # p x^p du_p: the power kept
    raw = []                                # each projection's sum on the power before its normalization
    for proj in (True, False):              # mean(g x^p) where mean(g h_p) belongs, or x^p multiplying it
        d = np.zeros_like(x)
        for k, p in enumerate(POWERS):
            h, r = own[k]
            g = dy * weight[k]
            du = r * (g - (us[k] if not proj else h) * (g * (us[k] if proj else h)).sum(axis=A, keepdims=True)
                      / dy.shape[-1])
            d = d + (du if p == 1 else p * x ** (p - 1) * du)
        raw.append((d, "each power's projection on " + ("mean(g_p x^p), the power before its normalization, where "
                    "mean(g_p h_p) belongs" if proj else "x^p (the power before its normalization) where h_p "
                    "multiplies mean(g_p h_p)")))
    return [(one, "one saved rstd, x's, for every power (h_p recomputed as x^p r_1)"),
            (dx, "the chain factor p x^(p - 1) evaluated at the normalized x (x r_1) instead of x"),
            (xp, "the chain factor p x^p instead of p x^(p - 1) (the power not decremented)")] + raw + [
        (sum(t for j, t in enumerate(terms) if j != k), f"the term of x^{p} left out of dx")
        for k, p in enumerate(POWERS)] + swapped


def _factor(q):
    return "1" if q == 1 else "2 x" if q == 2 else f"{q} x^{q - 1}"


def deviation(ex, case, record):
    """poly_norm's explanations of the failing arrays (module docstring), or []. ``ex``: explain.py."""
    x = record.inputs.get("x")
    if case.op != "poly_norm" or x is None or np.size(x) > ex.CONFIG_SIZE or not record.failing \
            or record.inputs.get("weight") is None:
        return []
    x = np.asarray(x, dtype=np.float64)
    weight = np.asarray(record.inputs["weight"], dtype=np.float64).reshape(-1)
    bias = record.inputs.get("bias")
    bias = None if bias is None else np.asarray(bias, dtype=np.float64)
    eps = float(case.config.get("eps", 1e-6))
    outs = [pn for pn in record.failing if pn[0] == "outputs"]
    E = lambda pn: record.E[pn[0]][pn[1]]                   # noqa: E731
    with np.errstate(all="ignore"):
        if outs == [("outputs", "y")]:
            got = record.got["outputs"]["y"]
            for y, what, mech in _forward_variants(x, weight, bias, eps):
                if ex.fit_ratio(got, y, E(("outputs", "y"))) <= 1:
                    return [{"part": "outputs", "name": "y", "step": record.step, "mechanism": mech,
                             "text": f"y is the specification's with {what}"}]
            return []
        dy = record.cotangents.get("y")
        if not outs and list(record.failing) == [("grads", "bias")] and dy is not None and bias is not None:
            db = np.reshape(3.0 * np.sum(np.asarray(dy, dtype=np.float64)), np.shape(bias))
            if ex.fit_ratio(record.got["grads"]["bias"], db, E(("grads", "bias"))) <= 1:
                return [{"part": "grads", "name": "bias", "step": record.step, "mechanism": "reduction",
                         "text": "dbias is 3 sum(dy): the bias's sum accumulated once per power term"}]
        if outs or list(record.failing) != [("grads", "x")] or dy is None:
            return []
        for dx, what in _backward_variants(x, np.asarray(dy, dtype=np.float64), weight, eps,
                                           None if bias is None else np.shape(bias)):
            if ex.fit_ratio(record.got["grads"]["x"], dx, E(("grads", "x"))) <= 1:
                return [{"part": "grads", "name": "x", "step": record.step, "mechanism": "backward",
                         "text": f"dx is the specification's backward with {what}"}]
    return []
