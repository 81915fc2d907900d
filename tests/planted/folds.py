"""Issue 21: how often the diagnosis names the right mechanism, measured on held-out planted bugs.

    python tests/planted/folds.py [--cache FILE]    (rewrites sections 7 and 9 of docs/pitfall_detection.md)
    (with --cache F, ``--torch-only --cache F.torch`` may run alongside: the torch kernel's rows, merged)

Every planted mutation of tests/planted/pitfalls.py (catalogue rows and supplementary classes) is run
on the golden cases of its ops with the emulated kernel (report.run), and every bug of the second,
independent kernel (tests/planted/torch_kernel.py, on torch) on the golden cases of its op. For each
failed case the diagnosis gives its best-fitting variant's mechanism and its confidence (the smaller of
its ratio against the best variant of every other mechanism and against no pitfall); at a margin M a
case is *named* when the confidence is at least M. Named *right*: the mechanism is the planted bug's
(the mechanism of a variant modelling one of the rows planted with that mutation; for the torch
kernel, the mechanism each bug declares); *wrong*: named, and not the planted bug's (a bug no variant
models can only be named wrongly).

Folds: the emulated kernel's mutations (not rows: rows planted with one mutation are one run), in
order of first appearance, alternate between fold A and fold B. M is tuned on one fold (the smallest
M of GRID whose wrong names are at most 1% of the named cases there) and measured on the other; the
code's MARGIN (refnorm/check/diagnosis.py) is the value tuned on fold A. The torch kernel is never
used for tuning. This is a script (minutes), not a test; it writes section 10 and, from the same runs,
section 7 (report.diagnosis_section); report.py regenerates the whole document (slowly) and keeps
section 10.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from planted import report                                              # noqa: E402
from planted.pitfalls import all_planted, pairs                         # noqa: E402
from planted.blind import BUGS as BLIND, BlindKernel                    # noqa: E402
from planted.blind2 import BUGS as BLIND2, Blind2Kernel                 # noqa: E402
from planted.blind3 import BUGS as BLIND3, Blind3Kernel                 # noqa: E402
from planted.blind4 import BUGS as BLIND4, Blind4Kernel                 # noqa: E402
from planted.blind5 import BUGS as BLIND5, Blind5Kernel                 # noqa: E402
from planted.blind6 import BUGS as BLIND6, Blind6Kernel                 # noqa: E402
from planted.blind7 import BUGS as BLIND7, Blind7Kernel                 # noqa: E402
from planted.blind8 import BUGS as BLIND8, Blind8Kernel                 # noqa: E402
from planted.blind9 import BUGS as BLIND9, Blind9Kernel                 # noqa: E402
from planted.blind10 import BUGS as BLIND10, Blind10Kernel              # noqa: E402
from planted.blind11 import BUGS as BLIND11, Blind11Kernel              # noqa: E402
from planted.blind12 import BUGS as BLIND12, Blind12Kernel              # noqa: E402
from planted.blind13 import BUGS as BLIND13, Blind13Kernel              # noqa: E402
from planted.blind14 import BUGS as BLIND14, Blind14Kernel              # noqa: E402
from planted.blind15 import BUGS as BLIND15, Blind15Kernel              # noqa: E402
from planted.blind16 import BUGS as BLIND16, Blind16Kernel              # noqa: E402
from planted.blind17 import BUGS as BLIND17, Blind17Kernel              # noqa: E402
from planted.blind18 import BUGS as BLIND18, Blind18Kernel              # noqa: E402
from planted.blind19 import BUGS as BLIND19, Blind19Kernel              # noqa: E402
from planted.blind20 import BUGS as BLIND20, Blind20Kernel              # noqa: E402
from planted.blind21 import BUGS as BLIND21, Blind21Kernel              # noqa: E402
from planted.blind22 import BUGS as BLIND22, Blind22Kernel              # noqa: E402
from planted.blind23 import BUGS as BLIND23, Blind23Kernel              # noqa: E402
from planted.blind24 import BUGS as BLIND24, Blind24Kernel              # noqa: E402
from planted.blind25 import BUGS as BLIND25, Blind25Kernel              # noqa: E402
from planted.blind26 import BUGS as BLIND26, Blind26Kernel              # noqa: E402
from planted.blind27 import BUGS as BLIND27, Blind27Kernel              # noqa: E402
from planted.blind28 import BUGS as BLIND28, Blind28Kernel              # noqa: E402
from planted.blind29 import BUGS as BLIND29, Blind29Kernel              # noqa: E402
from planted.blind30 import BUGS as BLIND30, Blind30Kernel              # noqa: E402
from planted.blind31 import BUGS as BLIND31, Blind31Kernel              # noqa: E402
from planted.blind32 import BUGS as BLIND32, Blind32Kernel              # noqa: E402
from planted.blind33 import BUGS as BLIND33, Blind33Kernel              # noqa: E402
from planted.blind34 import BUGS as BLIND34, Blind34Kernel              # noqa: E402
from planted.blind35 import BUGS as BLIND35, Blind35Kernel              # noqa: E402
from planted.blind36 import BUGS as BLIND36, Blind36Kernel              # noqa: E402
from planted.blind37 import BUGS as BLIND37, Blind37Kernel              # noqa: E402
from planted.blind38 import BUGS as BLIND38, Blind38Kernel              # noqa: E402
from planted.blind39 import BUGS as BLIND39, Blind39Kernel              # noqa: E402
from planted.blind40 import BUGS as BLIND40, Blind40Kernel              # noqa: E402
from planted.blind41 import BUGS as BLIND41, Blind41Kernel              # noqa: E402
from planted.blind42 import BUGS as BLIND42, Blind42Kernel              # noqa: E402
from planted.blind43 import BUGS as BLIND43, Blind43Kernel              # noqa: E402
from planted.blind44 import BUGS as BLIND44, Blind44Kernel              # noqa: E402
from planted.blind45 import BUGS as BLIND45, Blind45Kernel              # noqa: E402
from planted.blind46 import BUGS as BLIND46, Blind46Kernel              # noqa: E402
from planted.blind47 import BUGS as BLIND47, Blind47Kernel              # noqa: E402
from planted.blind48 import BUGS as BLIND48, Blind48Kernel              # noqa: E402
from planted.blind49 import BUGS as BLIND49, Blind49Kernel              # noqa: E402
from planted.torch_kernel import BUGS, TorchKernel                      # noqa: E402
from refnorm import pitfalls as P                                       # noqa: E402
from refnorm.check.core import check_case                               # noqa: E402
from refnorm.check.diagnosis import MARGIN                              # noqa: E402
from refnorm.golden import commands, store                              # noqa: E402

GRID = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
TUNE_WRONG = 0.01
BEGIN, END = "## 10. Diagnosis by mechanism, on held-out bugs", "<!-- END section 10 -->"


# the mechanism of a mutation that no diagnosis variant models (added with a trigger case, issue 35)
DECLARED = {"var_eps_in_d": "precision"}


def expected(p, op):
    ids = report.same_mechanism(p)
    got = sorted({v.mechanism for v in P.variants(op) if set(v.pitfall_ids) & ids})
    return got or ([DECLARED[p.mutation]] if p.mutation in DECLARED else [])


def _row(d):
    """(confidence, best-fitting mechanism) of a diagnosis; (None, None) when no variant fits."""
    if d and d.get("explained_by") == "arithmetic":      # named by the arithmetic search (explain.py)
        return float("inf"), d.get("mechanism")
    if not d or d.get("confidence") is None:
        return None, None
    best = d if d.get("matched") else (d.get("closest") or {})
    c = d["confidence"]
    return (float("inf") if c == "inf" else float(c)), best.get("mechanism")


def localized(c) -> bool:
    """Every failing array of the case has its localization in the diagnosis (a CheckResult's arrays,
    or a report.CaseOutcome's ``over`` names: "y", "dx", "dweight", "running_var", ...)."""
    where = (c.diagnosis or {}).get("where", ())
    if not where:
        return False
    if hasattr(c, "arrays"):
        have = {(w["part"], w["name"]) for w in where}
        return all((a.part, a.name) in have for a in c.arrays if not a.passed)
    have = {report._PART[w["part"]] + w["name"] for w in where}
    return all(n in have for n in c.over)


def emulated_rows():
    order = list(dict.fromkeys(p.mutation for p in all_planted()))
    fold = {m: "AB"[i % 2] for i, m in enumerate(order)}
    out, seen = [], set()
    for p, op in pairs(all_planted()):
        if (p.mutation, op) in seen:
            continue
        seen.add((p.mutation, op))
        for c in report.run(p.mutation, op).cases:
            if c.status == "failed":
                conf, mech = _row(c.diagnosis)
                out.append({"src": "emulated", "fold": fold[p.mutation], "bug": p.mutation, "op": op, "case": c.id,
                            "expected": expected(p, op), "conf": conf, "mech": mech, "localized": localized(c)})
    return out


# The second blind kernel's author labelled from blind.py's list of mechanisms, which predates three of
# refnorm's (gate, group, scale_rounding: issue 36). Where one of those is the definition of the bug (the
# gate's side of the norm; the span of a group; a block scale's own rounding rule), or refnorm's definition of
# a mechanism names it outright (affine: "which weight"), it is accepted beside the author's label; decided
# from the bugs' descriptions, and both scores are printed (`--score blind2`). Session 19 added two rule
# decisions of mistakes two authors labelled apart (blind2's and blind.py's label accepted beside the rule's).
TAXONOMY_GAPS = {"gated_nbg_inverted": ["gate"], "gated_group_size_ignored": ["group"],
                 "gated_bwd_ignores_groups": ["group"], "poly_weight_order_reversed": ["affine"],
                 "nqb_e8m0_round_nearest": ["scale_rounding"], "nqb_pow2_rule_ignored": ["scale_rounding"],
                 "nqb_nvfp4_scale_truncated": ["scale_rounding"],
                 # partial variances merged without their means' spread: rule 7's one_pass since session 19
                 "gn_merge_without_delta": ["one_pass"],
                 # y rounded to the 16-bit dtype before the quantizer (its amax and q from it): rule 8's precision
                 "nq_scale_from_rounded_y": ["precision"],
                 # session 25: a whole parameter gradient twice its value is rule 14's constant (blind24's label;
                 # blind10's author read rule 11's repeated partial sums)
                 "ln_dbias_accumulated_twice": ["constant"],
                 # session 30: float8 codes made through a 16-bit dtype (two roundings to nearest) are rule 8's
                 # precision, as blind33's author labelled them (blind4's read rounding, the conversion's mode)
                 "nq_fp8_via_float16": ["precision"],
                 # session 30: dx's means over a part of a channel norm's slice are rule 10's group (a backward
                 # reduction over a part of each slice), as blind35's author labelled them (blind5's read backward)
                 "bn_bwd_sums_per_position": ["group"]}


def kernel_rows(kernel, bugs, src, fold, golden=report.GOLDEN, also=None):
    """``kernel(bug)`` for every bug of ``bugs`` ({bug: (op, mechanism or None, ...)}) on every golden case
    of its op: one row per failed case; ``also`` {bug: [mechanism]} adds accepted names (TAXONOMY_GAPS)."""
    man = store.read_manifest(golden)
    out = []
    for bug, (op, mech, *_) in bugs.items():
        for e in man["cases"]:
            if e["case"]["op"] != op:
                continue
            r = check_case(kernel(bug), commands.load_case(golden, e["id"], manifest=man))
            if r.status == "failed":
                conf, got = _row(r.diagnosis)
                want = ([mech] if mech else []) + (also or {}).get(bug, [])
                out.append({"src": src, "fold": fold, "bug": bug, "op": op, "case": r.id,
                            "expected": want, "conf": conf, "mech": got, "localized": localized(r),
                            "error": (r.diagnosis or {}).get("explain_error")})     # (the search crashing)
    return out


def torch_rows(golden=report.GOLDEN):
    """The second kernel (tests/planted/torch_kernel.py) on every golden case of its bugs' ops."""
    return kernel_rows(TorchKernel, BUGS, "torch", "T", golden)


def blind_rows(golden=report.GOLDEN):
    """The blind kernel (tests/planted/blind.py: 30 bugs from public kernels, written by someone who had not
    seen the diagnosis's rules, with the mechanism they chose) on every golden case of its bug's op."""
    return kernel_rows(BlindKernel, BLIND, "blind", "X", golden, also=TAXONOMY_GAPS)


def blind2_rows(golden=report.GOLDEN):
    """The second blind kernel (tests/planted/blind2.py: 40 bugs in ten ops, half from public bug reports,
    written by another helper who had not seen the diagnosis, after the rules of the blind kernel were built)."""
    return kernel_rows(Blind2Kernel, BLIND2, "blind2", "Y", golden, also=TAXONOMY_GAPS)


def blind3_rows(golden=report.GOLDEN):
    """The third blind kernel (tests/planted/blind3.py: 44 bugs in 13 ops, labelled with refnorm's whole list of
    mechanisms, written by a third helper not shown the diagnosis; measured once, at the end of its session)."""
    return kernel_rows(Blind3Kernel, BLIND3, "blind3", "Z", golden)


def blind4_rows(golden=report.GOLDEN):
    """The fourth blind kernel (tests/planted/blind4.py: 44 bugs in 13 ops, written by a fourth helper not shown
    the diagnosis, while this session's arithmetic search was built; measured once, at the end)."""
    return kernel_rows(Blind4Kernel, BLIND4, "blind4", "W", golden, also=TAXONOMY_GAPS)


def blind5_rows(golden=report.GOLDEN):
    """The fifth blind kernel (tests/planted/blind5.py: 48 bugs in 15 ops, written by a fifth helper not shown
    the diagnosis, who never ran it on these bugs; measured once, at the end)."""
    return kernel_rows(Blind5Kernel, BLIND5, "blind5", "V", golden, also=TAXONOMY_GAPS)


def blind6_rows(golden=report.GOLDEN):
    """The sixth blind kernel (tests/planted/blind6.py: 44 bugs in 15 ops, written by a sixth helper not shown
    the diagnosis, who never ran it on these bugs; measured once, at the end)."""
    return kernel_rows(Blind6Kernel, BLIND6, "blind6", "U", golden)


def blind7_rows(golden=report.GOLDEN):
    """The seventh blind kernel (tests/planted/blind7.py: 44 bugs in 15 ops, written by a seventh helper not
    shown the diagnosis, who never ran it on these bugs and reported only counts; measured once, at the end)."""
    return kernel_rows(Blind7Kernel, BLIND7, "blind7", "S", golden)


def blind8_rows(golden=report.GOLDEN):
    """The eighth blind kernel (tests/planted/blind8.py: 44 bugs in 15 ops, written by an eighth helper not
    shown the diagnosis, who never ran it on these bugs and reported only counts; measured once, at the end)."""
    return kernel_rows(Blind8Kernel, BLIND8, "blind8", "R", golden)


def blind9_rows(golden=report.GOLDEN):
    """The ninth blind kernel (tests/planted/blind9.py: 42 bugs in 15 ops, written by a ninth helper not
    shown the diagnosis, labelled by docs/verdicts.md's "Which mechanism a bug is", who never ran it on these
    bugs and reported only counts; measured once, at the end)."""
    return kernel_rows(Blind9Kernel, BLIND9, "blind9", "Q", golden)


def blind10_rows(golden=report.GOLDEN):
    """The tenth blind kernel (tests/planted/blind10.py: 44 bugs in 15 ops, written by a tenth helper not
    shown the diagnosis, labelled by docs/verdicts.md's rules, who never ran it on these bugs and reported only
    counts; measured once, at the end)."""
    return kernel_rows(Blind10Kernel, BLIND10, "blind10", "P", golden, also=TAXONOMY_GAPS)


def blind11_rows(golden=report.GOLDEN):
    """The eleventh blind kernel (tests/planted/blind11.py: 43 bugs in 15 ops, written by an eleventh helper not
    shown the diagnosis, labelled by docs/verdicts.md's rules, who never ran it on these bugs and reported only
    counts; merged unread and measured once, at the end)."""
    return kernel_rows(Blind11Kernel, BLIND11, "blind11", "O", golden)


def blind12_rows(golden=report.GOLDEN):
    """The twelfth blind kernel (tests/planted/blind12.py: 42 bugs in 8 ops, written by a twelfth helper not
    shown the diagnosis nor session 18's families, labelled by docs/verdicts.md's rules, who never ran it on
    these bugs and reported only counts; merged unread and measured once, on the session's final code)."""
    return kernel_rows(Blind12Kernel, BLIND12, "blind12", "N", golden)


def blind13_rows(golden=report.GOLDEN):
    """The thirteenth blind kernel (tests/planted/blind13.py: 44 bugs in the other 7 ops, written beside the
    twelfth by a thirteenth helper under the same rules; merged unread and measured once)."""
    return kernel_rows(Blind13Kernel, BLIND13, "blind13", "L", golden)


def blind14_rows(golden=report.GOLDEN):
    """The fourteenth blind kernel (tests/planted/blind14.py: 43 bugs in 7 ops, written by a fourteenth helper not
    shown the diagnosis nor session 19's families, labelled by docs/verdicts.md's rules, who never ran it on these
    bugs and reported only counts; merged unread and measured once, on the session's final code)."""
    return kernel_rows(Blind14Kernel, BLIND14, "blind14", "K", golden)


def blind15_rows(golden=report.GOLDEN):
    """The fifteenth blind kernel (tests/planted/blind15.py: 44 bugs in the other 8 ops, written beside the
    fourteenth by a fifteenth helper under the same rules; merged unread and measured once)."""
    return kernel_rows(Blind15Kernel, BLIND15, "blind15", "J", golden)


def blind16_rows(golden=report.GOLDEN):
    """The sixteenth blind kernel (tests/planted/blind16.py: 42 bugs in 7 ops, written by a sixteenth helper not
    shown the diagnosis, who never ran it on these bugs and reported only counts; merged unread and measured once,
    at the end of session 20)."""
    return kernel_rows(Blind16Kernel, BLIND16, "blind16", "I", golden)


def blind17_rows(golden=report.GOLDEN):
    """The seventeenth blind kernel (tests/planted/blind17.py: 43 bugs in the other 8 ops, written beside the
    sixteenth by a seventeenth helper under the same rules; measured once, at the end of session 20)."""
    return kernel_rows(Blind17Kernel, BLIND17, "blind17", "H", golden)


def blind18_rows(golden=report.GOLDEN):
    """The eighteenth blind kernel (tests/planted/blind18.py: 43 bugs in 7 ops, written by an eighteenth helper
    not shown the diagnosis, who never ran it on these bugs and reported only counts; merged unread and measured
    once, at the end of session 21)."""
    return kernel_rows(Blind18Kernel, BLIND18, "blind18", "G", golden)


def blind19_rows(golden=report.GOLDEN):
    """The nineteenth blind kernel (tests/planted/blind19.py: 43 bugs in the other 8 ops, written beside the
    eighteenth by a nineteenth helper under the same rules; measured once, at the end of session 21)."""
    return kernel_rows(Blind19Kernel, BLIND19, "blind19", "F", golden)


def blind20_rows(golden=report.GOLDEN):
    """The twentieth blind kernel (tests/planted/blind20.py: 42 bugs in 7 ops, written by a twentieth helper
    not shown the diagnosis, who never ran it on these bugs and reported only counts; merged unread and measured
    once, at the end of session 22)."""
    return kernel_rows(Blind20Kernel, BLIND20, "blind20", "E", golden)


def blind21_rows(golden=report.GOLDEN):
    """The twenty-first blind kernel (tests/planted/blind21.py: 43 bugs in the other 8 ops, written beside the
    twentieth by a twenty-first helper under the same rules; measured once, at the end of session 22)."""
    return kernel_rows(Blind21Kernel, BLIND21, "blind21", "D", golden)


def blind22_rows(golden=report.GOLDEN):
    """The twenty-second blind kernel (tests/planted/blind22.py: 42 bugs in 7 ops, written by a twenty-second
    helper not shown the diagnosis, who never ran it on these bugs and reported only counts; merged unread and
    measured once, at the end of session 23)."""
    return kernel_rows(Blind22Kernel, BLIND22, "blind22", "C", golden)


def blind23_rows(golden=report.GOLDEN):
    """The twenty-third blind kernel (tests/planted/blind23.py: 44 bugs in the other 8 ops, written beside the
    twenty-second by a twenty-third helper under the same rules; measured once, at the end of session 23)."""
    return kernel_rows(Blind23Kernel, BLIND23, "blind23", "M", golden)


def blind24_rows(golden=report.GOLDEN):
    """The twenty-fourth blind kernel (tests/planted/blind24.py: 42 bugs in 7 ops, written by a twenty-fourth
    helper not shown the diagnosis, who never ran it on these bugs and reported only counts; merged unread and
    measured once, at the end of session 24)."""
    return kernel_rows(Blind24Kernel, BLIND24, "blind24", "T24", golden)


def blind25_rows(golden=report.GOLDEN):
    """The twenty-fifth blind kernel (tests/planted/blind25.py: 44 bugs in the other 8 ops, written beside the
    twenty-fourth by a twenty-fifth helper under the same rules; measured once, at the end of session 24)."""
    return kernel_rows(Blind25Kernel, BLIND25, "blind25", "T25", golden)


def blind26_rows(golden=report.GOLDEN):
    """The twenty-sixth blind kernel (tests/planted/blind26.py: 46 bugs in 7 ops, written by a twenty-sixth
    helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who never ran it on these bugs and
    reported only counts; merged unread and measured once, at the end of session 25)."""
    return kernel_rows(Blind26Kernel, BLIND26, "blind26", "T26", golden)


def blind27_rows(golden=report.GOLDEN):
    """The twenty-seventh blind kernel (tests/planted/blind27.py: 46 bugs in the other 8 ops, written beside the
    twenty-sixth, the same way)."""
    return kernel_rows(Blind27Kernel, BLIND27, "blind27", "T27", golden)


def blind28_rows(golden=report.GOLDEN):
    """The twenty-eighth blind kernel (tests/planted/blind28.py: 47 bugs in 7 ops, written by a twenty-eighth
    helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who never ran it on these bugs and
    reported only counts; merged unread and measured once, at the end)."""
    return kernel_rows(Blind28Kernel, BLIND28, "blind28", "T28", golden)


def blind29_rows(golden=report.GOLDEN):
    """The twenty-ninth blind kernel (tests/planted/blind29.py: 45 bugs in the other 8 ops, written beside the
    twenty-eighth, the same way)."""
    return kernel_rows(Blind29Kernel, BLIND29, "blind29", "T29", golden)


def blind30_rows(golden=report.GOLDEN):
    """The thirtieth blind kernel (tests/planted/blind30.py: 48 bugs in 7 ops, written by a thirtieth helper
    not shown the diagnosis, labelled by docs/verdicts.md's rules, who never ran it on these bugs and reported
    only counts; merged unread and measured once, at the end)."""
    return kernel_rows(Blind30Kernel, BLIND30, "blind30", "T30", golden)


def blind31_rows(golden=report.GOLDEN):
    """The thirty-first blind kernel (tests/planted/blind31.py: 46 bugs in the other 8 ops, written beside the
    thirtieth, the same way)."""
    return kernel_rows(Blind31Kernel, BLIND31, "blind31", "T31", golden)


def blind32_rows(golden=report.GOLDEN):
    """The thirty-second blind kernel (tests/planted/blind32.py: 44 bugs in 7 ops, written by a thirty-second
    helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who never ran it on these bugs and
    reported only counts; merged unread and measured once, at the end)."""
    return kernel_rows(Blind32Kernel, BLIND32, "blind32", "T32", golden)


def blind33_rows(golden=report.GOLDEN):
    """The thirty-third blind kernel (tests/planted/blind33.py: 46 bugs in the other 8 ops, written beside the
    thirty-second, the same way)."""
    return kernel_rows(Blind33Kernel, BLIND33, "blind33", "T33", golden)


def blind34_rows(golden=report.GOLDEN):
    """The thirty-fourth blind kernel (tests/planted/blind34.py: 43 bugs in 7 ops, written in session 30 by a
    helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged
    unread and measured once, at the end of that session)."""
    return kernel_rows(Blind34Kernel, BLIND34, "blind34", "T34", golden)


def blind35_rows(golden=report.GOLDEN):
    """The thirty-fifth blind kernel (tests/planted/blind35.py: 43 bugs in the other 8 ops, written beside the
    thirty-fourth, the same way)."""
    return kernel_rows(Blind35Kernel, BLIND35, "blind35", "T35", golden)


def blind36_rows(golden=report.GOLDEN):
    """The thirty-sixth blind kernel (tests/planted/blind36.py: 43 bugs in blind34's 7 ops, written in session 31
    by a helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged
    unread and measured once, at the end of that session)."""
    return kernel_rows(Blind36Kernel, BLIND36, "blind36", "T36", golden)


def blind37_rows(golden=report.GOLDEN):
    """The thirty-seventh blind kernel (tests/planted/blind37.py: 42 bugs in the other 8 ops, written beside the
    thirty-sixth, the same way)."""
    return kernel_rows(Blind37Kernel, BLIND37, "blind37", "T37", golden)


def blind38_rows(golden=report.GOLDEN):
    """The thirty-eighth blind kernel (tests/planted/blind38.py: 42 bugs in blind36's 7 ops, written in session 32
    by a helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged
    unread and measured once, before that session's development on them)."""
    return kernel_rows(Blind38Kernel, BLIND38, "blind38", "T38", golden)


def blind39_rows(golden=report.GOLDEN):
    """The thirty-ninth blind kernel (tests/planted/blind39.py: 40 bugs in the other 8 ops, written beside the
    thirty-eighth, the same way)."""
    return kernel_rows(Blind39Kernel, BLIND39, "blind39", "T39", golden)


def blind40_rows(golden=report.GOLDEN):
    """The fortieth blind kernel (tests/planted/blind40.py: 42 bugs in blind38's 7 ops, written in session 34 by a
    helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged unread
    and measured once, before that session's development on them)."""
    return kernel_rows(Blind40Kernel, BLIND40, "blind40", "T40", golden)


def blind41_rows(golden=report.GOLDEN):
    """The forty-first blind kernel (tests/planted/blind41.py: 45 bugs in the other 8 ops, written beside the
    fortieth, the same way)."""
    return kernel_rows(Blind41Kernel, BLIND41, "blind41", "T41", golden)


def blind42_rows(golden=report.GOLDEN):
    """The forty-second blind kernel (tests/planted/blind42.py: 41 bugs in blind40's 7 ops, written in session 35 by
    a helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged unread
    and measured once, before that session's development on them)."""
    return kernel_rows(Blind42Kernel, BLIND42, "blind42", "T42", golden)


def blind43_rows(golden=report.GOLDEN):
    """The forty-third blind kernel (tests/planted/blind43.py: 40 bugs in the other 8 ops, written beside the
    forty-second, the same way)."""
    return kernel_rows(Blind43Kernel, BLIND43, "blind43", "T43", golden)


def blind44_rows(golden=report.GOLDEN):
    """The forty-fourth blind kernel (tests/planted/blind44.py: 42 bugs in blind42's 7 ops, written in session 36 by
    a helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged unread
    and measured once, before that session's development on them)."""
    return kernel_rows(Blind44Kernel, BLIND44, "blind44", "T44", golden)


def blind45_rows(golden=report.GOLDEN):
    """The forty-fifth blind kernel (tests/planted/blind45.py: 45 bugs in the other 8 ops, written beside the
    forty-fourth, the same way)."""
    return kernel_rows(Blind45Kernel, BLIND45, "blind45", "T45", golden)


def blind46_rows(golden=report.GOLDEN):
    """The forty-sixth blind kernel (tests/planted/blind46.py: bugs in blind44's 7 ops, written in session 37 by a
    helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged unread
    and measured once, before that session's development on them)."""
    return kernel_rows(Blind46Kernel, BLIND46, "blind46", "T46", golden)


def blind47_rows(golden=report.GOLDEN):
    """The forty-seventh blind kernel (tests/planted/blind47.py: 45 bugs in the other 8 ops, written beside the
    forty-sixth, the same way)."""
    return kernel_rows(Blind47Kernel, BLIND47, "blind47", "T47", golden)


def blind48_rows(golden=report.GOLDEN):
    """The forty-eighth blind kernel (tests/planted/blind48.py: 44 bugs in blind46's 7 ops, written in session 38 by
    a helper not shown the diagnosis, labelled by docs/verdicts.md's rules, who reported only counts; merged unread
    and measured once, before that session's development on them)."""
    return kernel_rows(Blind48Kernel, BLIND48, "blind48", "T48", golden)


def blind49_rows(golden=report.GOLDEN):
    """The forty-ninth blind kernel (tests/planted/blind49.py: 42 bugs in the other 8 ops, written beside the
    forty-eighth, the same way)."""
    return kernel_rows(Blind49Kernel, BLIND49, "blind49", "T49", golden)


HELD_OUT = {"torch": torch_rows, "blind": blind_rows, "blind2": blind2_rows, "blind3": blind3_rows,
            "blind4": blind4_rows, "blind5": blind5_rows, "blind6": blind6_rows, "blind7": blind7_rows,
            "blind8": blind8_rows, "blind9": blind9_rows, "blind10": blind10_rows,
            "blind11": blind11_rows, "blind12": blind12_rows, "blind13": blind13_rows, "blind14": blind14_rows,
            "blind15": blind15_rows, "blind16": blind16_rows, "blind17": blind17_rows, "blind18": blind18_rows,
            "blind19": blind19_rows, "blind20": blind20_rows, "blind21": blind21_rows,
            "blind22": blind22_rows, "blind23": blind23_rows, "blind24": blind24_rows, "blind25": blind25_rows,
            "blind26": blind26_rows, "blind27": blind27_rows, "blind28": blind28_rows, "blind29": blind29_rows,
            "blind30": blind30_rows, "blind31": blind31_rows, "blind32": blind32_rows, "blind33": blind33_rows,
            "blind34": blind34_rows, "blind35": blind35_rows, "blind36": blind36_rows, "blind37": blind37_rows,
            "blind38": blind38_rows, "blind39": blind39_rows, "blind40": blind40_rows, "blind41": blind41_rows,
            "blind42": blind42_rows, "blind43": blind43_rows, "blind44": blind44_rows, "blind45": blind45_rows,
            "blind46": blind46_rows, "blind47": blind47_rows, "blind48": blind48_rows,
            "blind49": blind49_rows}


def score(rows, M):
    """(failed cases, named right, named wrong, runs, runs named right (a majority of their cases))."""
    named = [r for r in rows if r["conf"] is not None and r["conf"] >= M]
    right = sum(r["mech"] in r["expected"] for r in named)
    runs = {}
    for r in rows:
        ok = r["conf"] is not None and r["conf"] >= M and r["mech"] in r["expected"]
        runs.setdefault((r["bug"], r["op"]), []).append(ok)
    return len(rows), right, len(named) - right, len(runs), sum(2 * sum(v) > len(v) for v in runs.values())


def held_out(V):
    """A held-out kernel's figures in words (the table's line, said once more in the prose)."""
    if not V:
        return ""
    n, right, wrong, *_ = score(V, MARGIN)
    lab = [r for r in V if r["expected"]]
    nl, rl, wl, *_ = score(lab, MARGIN)
    return (f"Of its {n} failed cases {right} ({100 * right / n:.1f}%) are named right and {wrong} wrong "
            f"({100 * wrong / max(right + wrong, 1):.1f}% of the named ones; on its labelled bugs "
            f"{100 * wl / max(rl + wl, 1):.1f}%); the issue asks for at least 85% right and at most 2% wrong.")


def tune(rows):
    for M in GRID:
        n, right, wrong, *_ = score(rows, M)
        if wrong <= TUNE_WRONG * max(right + wrong, 1):
            return M
    return GRID[-1]


def _pct(a, b):
    return f"{100 * a / b:.1f}%" if b else "-"


def line_pct(rows, M=None):
    """A set's named-right and named-wrong shares in words."""
    n, right, wrong, *_ = score(rows, MARGIN if M is None else M)
    return f"{_pct(right, n)} named right and {_pct(wrong, right + wrong)} wrong ({n} failed cases)"


# what session 21 read in its held-out kernels' rows after their one measurement
READ_21 = (" Lower than every held-out pair before (63.0%, 55.8% and 54.3% right at their measurements), though "
           "the sixteenth and seventeenth gained as development sets (above): the families were written for the "
           "forms those kernels showed, and the next kernels made neighbouring mistakes in other forms and ops. "
           "Read after the measurement: 65 of the 94 wrong names are three of the eighteenth's bugs whose "
           "mechanism sits between two rules (dweight's first partial sum skipped, labelled reduction, named "
           "backward: 39; dyt's tanh chain factor dropped, a whole dx off by a constant factor, labelled backward, "
           "named constant: 19; the inverse scale rounded to the 16-bit dtype, labelled precision, named rounding: "
           "7). The largest unexplained are cousins of this session's families in another op or form: "
           "instance_norm's eps and momentum exchanged, a tile's padded lanes in z_score's sum of squares, chunk "
           "partials merged without their means' spread (z_score) or unweighted (instance_norm), group_norm_silu's "
           "statistics over a power-of-two tile, instance_norm's backward reading its statistics channel-major, "
           "gated_norm's backward z of the next row, a block Welford combine's spread divided by the block "
           "count, a batch_norm spatial tail tile dropped; and others new: a packed (mean, rstd) buffer split as "
           "halves, lp_normalize's norm taken as a power mean, group_norm's fused shift without gamma, poly_norm's "
           "bias inside its linear term.")


# session 19's re-measurement of its held-out kernels on its final code (development figures, from that
# regeneration's rows of blind14 and blind15; the table's lines are this table's code)
AFTER_19 = ("Re-measured on session 19's final code (development figures): the fourteenth kernel 51.3% -> "
            "70.4% named right (4.8% wrong), the fifteenth 59.2% -> 76.7% (1.7% wrong), both 55.8% -> 73.9% "
            "(3.0% wrong) of their 1877 failed cases.")


def line(name, rows, M):
    n, right, wrong, runs, runs_ok = score(rows, M)
    loc = sum(bool(r.get("localized")) for r in rows)
    return (f"| {name} | {M:g} | {n} | {right} ({_pct(right, n)}) | {wrong} ({_pct(wrong, right + wrong)}) | "
            f"{runs_ok} / {runs} ({_pct(runs_ok, runs)}) | {loc} ({_pct(loc, n)}) |")


def render(rows, seconds):
    A = [r for r in rows if r["fold"] == "A"]
    B = [r for r in rows if r["fold"] == "B"]
    T = [r for r in rows if r["fold"] == "T"]
    X = [r for r in rows if r["fold"] == "X"]
    Y = [r for r in rows if r["fold"] == "Y"]
    Z = [r for r in rows if r["fold"] == "Z"]
    W = [r for r in rows if r["fold"] == "W"]
    V = [r for r in rows if r["fold"] == "V"]
    U = [r for r in rows if r["fold"] == "U"]
    S = [r for r in rows if r["fold"] == "S"]
    R = [r for r in rows if r["fold"] == "R"]
    Q = [r for r in rows if r["fold"] == "Q"]
    P_ = [r for r in rows if r["fold"] == "P"]
    O_ = [r for r in rows if r["fold"] == "O"]
    N_ = [r for r in rows if r["fold"] == "N"]
    L_ = [r for r in rows if r["fold"] == "L"]
    K_ = [r for r in rows if r["fold"] == "K"]
    J_ = [r for r in rows if r["fold"] == "J"]
    I_ = [r for r in rows if r["fold"] == "I"]
    H_ = [r for r in rows if r["fold"] == "H"]
    G_ = [r for r in rows if r["fold"] == "G"]
    F_ = [r for r in rows if r["fold"] == "F"]
    mA, mB = tune(A), tune(B)
    muts = lambda f: ", ".join(f"`{m}`" for m in dict.fromkeys(r["bug"] for r in rows if r["fold"] == f))  # noqa: E731
    L = [BEGIN, "",
         "Generated by `python tests/planted/folds.py` (issue 21; the rest of this document by report.py). The "
         "diagnosis names a *mechanism* (refnorm/pitfalls/mechanisms.py) when its best-fitting variant fits every "
         "compared array within the bound and its worst ratio, floored at 0.05, is at least M times smaller than "
         "that of the best variant of every other mechanism and, on every failing array, than the reference's "
         "(\"no pitfall\", judged within the check's own bounds; issue 33), or when no variant is named and the "
         "arithmetic search (refnorm/check/explain.py; its families in docs/verdicts.md) explains every failing "
         "array, or every failing output, with one mechanism. A fit within the check's own bounds ranks before, and is compared with the others' "
         "ratios within those bounds, a fit only within a variant's summation-order spread; a variant computing "
         "another equation (rms_norm as layer_norm, eps outside the root) is judged within that computation's "
         "bounds (Variant.bounds_as), competes by its ratio within the check's, and is no evidence where the "
         "reference fits those bounds too; a statistic computed in a lower precision carries the rounding of "
         "its gradient in an autograd backward (Variant.slack); the rounding-point search rounds one "
         "intermediate (mean, rstd, x_hat) to bfloat16 or float16, to nearest (`precision`) or toward zero "
         "(`rounding`). \"localized\": every failing array of the case has its rows / channels / columns in the "
         "diagnosis (refnorm/check/localize.py). \"named right\": the mechanism of "
         "the planted bug; \"named wrong\": any other (its share is of the named cases). A run (bug, op) is "
         "named right when more than half of its failed cases are. M is tuned on one fold (the smallest M of "
         f"{', '.join(f'{g:g}' for g in GRID)} with at most {100 * TUNE_WRONG:g}% wrong names there) and "
         f"measured on the other. The code's MARGIN = {MARGIN:g} was fixed before this measurement (a cushion "
         "over the noise of a correct kernel's ratios); the held-out figures are given at both. While the rule was "
         "built, these runs were looked at: the emulated `one_pass_clamp`, `no_B_term` (layer_norm) and "
         "`eps_outside` (rms_norm), and the second kernel's layer_norm bugs on the few cases of "
         "tests/test_mechanisms.py; nothing else before this table. Later, the output rounding variant (mechanism "
         "`rounding`) was written for fold A's `truncate_out` and checked on its runs (all five ops) before this "
         "table was regenerated: that bug is no longer held out, and the M rule was not retuned. Issue 33 (the rule "
         "against no pitfall taken within the check's own bounds, the one-pass spread over any summation order, the "
         "arithmetic search, localization): built on tests/test_localize.py's and tests/test_explain.py's few "
         "planted cases and torch CPU's channels_last GroupNorm; the second kernel's table was looked at once "
         "before the last two changes (an exact arithmetic explanation beating a fit within a rounding interval, "
         "the configuration search keeping passing arrays within their bounds) and its `rms_dw_rows_half` "
         "relabelled from no mechanism to `reduction` (dweight summed over half the rows: the reduction "
         "mechanism's definition); the blind kernel was run once, after every change, and is held out. "
         "`var_eps_in_d` (a trigger mutation no variant models) is labelled `precision` (folds.DECLARED).", "",
         f"Fold A (mutations): {muts('A')}.", "", f"Fold B: {muts('B')}.", "",
         "Second kernel (tests/planted/torch_kernel.py, torch float32 autograd, written apart from "
         "emulated.py; never used for tuning): " + "; ".join(f"`{b}` ({BUGS[b][0]}: {BUGS[b][2]}; mechanism "
                                                               f"{BUGS[b][1] or 'none modelled'})" for b in BUGS) + ".",
         "",
         "| measured on | M | failed cases | named right | named wrong (of named) | runs named right | localized |",
         "|---|---|---|---|---|---|---|",
         line(f"fold A (tuning fold: M tuned here = {mA:g})", A, mA),
         line("fold B, held out (M tuned on A)", B, mA),
         line("fold B, held out (M = MARGIN)", B, MARGIN),
         line(f"fold B (tuning fold: M tuned here = {mB:g})", B, mB),
         line("fold A, held out (M tuned on B)", A, mB),
         line("fold A, held out (M = MARGIN)", A, MARGIN),
         line("fold A, held out, bugs with a modelled mechanism (M = MARGIN)", [r for r in A if r["expected"]],
              MARGIN),
         line("fold B, held out, bugs with a modelled mechanism (M = MARGIN)", [r for r in B if r["expected"]],
              MARGIN),
         line("second kernel, held out (M = MARGIN)", T, MARGIN),
         line("second kernel, only bugs with a modelled mechanism", [r for r in T if r["expected"]], MARGIN),
         line("blind kernel, held out (M = MARGIN)", X, MARGIN),
         line("blind kernel, only bugs with a mechanism label", [r for r in X if r["expected"]], MARGIN),
         line("second blind kernel, development set (M = MARGIN)", Y, MARGIN),
         line("third blind kernel, development set (M = MARGIN)", Z, MARGIN),
         line("fourth blind kernel, development set since session 13 (M = MARGIN)", W, MARGIN),
         line("fourth blind kernel, only bugs with a mechanism label", [r for r in W if r["expected"]], MARGIN),
         line("fifth blind kernel, development set after its measurement (M = MARGIN)", V, MARGIN),
         line("fifth blind kernel, only bugs with a mechanism label", [r for r in V if r["expected"]], MARGIN),
         line("sixth blind kernel, development set after its measurement (M = MARGIN)", U, MARGIN),
         line("sixth blind kernel, only bugs with a mechanism label", [r for r in U if r["expected"]], MARGIN),
         line("seventh blind kernel, development set after its measurement (M = MARGIN)", S, MARGIN),
         line("seventh blind kernel, only bugs with a mechanism label", [r for r in S if r["expected"]], MARGIN),
         line("eighth blind kernel, development set after its measurement (M = MARGIN)", R, MARGIN),
         line("eighth blind kernel, only bugs with a mechanism label", [r for r in R if r["expected"]], MARGIN),
         line("ninth blind kernel, development set after its measurement (M = MARGIN)", Q, MARGIN),
         line("ninth blind kernel, only bugs with a mechanism label", [r for r in Q if r["expected"]], MARGIN),
         line("tenth blind kernel, development set after its measurement (M = MARGIN)", P_, MARGIN),
         line("tenth blind kernel, only bugs with a mechanism label", [r for r in P_ if r["expected"]], MARGIN),
         line("eleventh blind kernel, development set after its measurement (M = MARGIN)", O_, MARGIN),
         line("eleventh blind kernel, only bugs with a mechanism label", [r for r in O_ if r["expected"]], MARGIN),
         line("twelfth blind kernel, development set after its measurement (M = MARGIN)", N_, MARGIN),
         line("twelfth blind kernel, only bugs with a mechanism label", [r for r in N_ if r["expected"]], MARGIN),
         line("thirteenth blind kernel, development set after its measurement (M = MARGIN)", L_, MARGIN),
         line("thirteenth blind kernel, only bugs with a mechanism label", [r for r in L_ if r["expected"]], MARGIN),
         line("fourteenth blind kernel, development set after its measurement (M = MARGIN)", K_, MARGIN),
         line("fourteenth blind kernel, only bugs with a mechanism label", [r for r in K_ if r["expected"]], MARGIN),
         line("fifteenth blind kernel, development set after its measurement (M = MARGIN)", J_, MARGIN),
         line("fifteenth blind kernel, only bugs with a mechanism label", [r for r in J_ if r["expected"]], MARGIN),
         line("sixteenth blind kernel, development set after its measurement (M = MARGIN)", I_, MARGIN),
         line("sixteenth blind kernel, only bugs with a mechanism label", [r for r in I_ if r["expected"]], MARGIN),
         line("seventeenth blind kernel, development set after its measurement (M = MARGIN)", H_, MARGIN),
         line("seventeenth blind kernel, only bugs with a mechanism label", [r for r in H_ if r["expected"]], MARGIN),
         line("eighteenth blind kernel, held out, measured once (M = MARGIN)", G_, MARGIN),
         line("eighteenth blind kernel, only bugs with a mechanism label", [r for r in G_ if r["expected"]], MARGIN),
         line("nineteenth blind kernel, held out, measured once (M = MARGIN)", F_, MARGIN),
         line("nineteenth blind kernel, only bugs with a mechanism label", [r for r in F_ if r["expected"]], MARGIN),
         line("eighteenth and nineteenth together (15 ops), held out (M = MARGIN)", G_ + F_, MARGIN),
         "",
         "The second and third blind kernels were written after the rules above were built, with bugs in ops "
         "the catalogue covers thinly (gated_norm, dyt, poly_norm, group_norm_silu, norm_quant_block, "
         "adaptive_layer_norm, add_norm, norm_quant). Session 11 measured them at 24.6% / 14.3% and 32.2% / "
         "18.7% (right / wrong of named): the diagnosis did not generalize, and most wrong names were the "
         "one-pass variance, whose summation-order spread on mean-shifted rows holds any statistic error of "
         "its size. Session 12 then used both as development sets (their rows looked at per bug, their "
         "descriptions read): the one-pass spread now needs one rounding error per row to reproduce every "
         "forward array of the row (refnorm/check/consistent.py) and a failing forward array, and the "
         "arithmetic search gained the families listed in docs/verdicts.md (statistics changed where a kernel "
         "uses them, powers, configuration and input deviations, the other mode, a layout misread, wrong "
         "products and counts in the backward, a fused activation moved), each written as a family of the "
         "specification's arithmetic with a planted test (tests/test_explain_families.py), not as a rule "
         "for one bug. Their figures above are therefore development figures. The fourth blind kernel was "
         "written during that session by a helper not shown the diagnosis and run once, after the last "
         "change: it is the held-out measurement of this table, and it says the diagnosis does not "
         "generalize yet (issue 33 stays open): 15.8% of its failed cases named right, 25.6% of the named "
         "ones wrong, 35 of those 50 wrong names on `ln_param_grads_swapped`, which its author left "
         "unlabelled (the diagnosis calls dweight and dbias returned under each other's names an affine "
         "mistake); on the labelled bugs 9.4% of the named cases are wrong. Most of its bugs are families the "
         "search does not have (a backward formula of gated_norm, dyt, poly_norm, group_norm_silu, "
         "adaptive_layer_norm or add_norm with one factor changed; quantization scales built another way; "
         "statistics read in another index order; a reciprocal square root's estimate), which the "
         "development sets' families did not anticipate.",
         "",
         "Session 13 used the fourth kernel as a development set too (its rows read per bug), and built: "
         "quantized outputs judged at the kernel's own returned scale (refnorm/check/explain_quant.py); index "
         "orders, statistics over other axes and the just-updated running statistics (explain_index.py); "
         "the backward of every op written as the named terms of its chain rule (explain_terms.py); the "
         "specification searched as a program (spec_search.py: one named intermediate rounded, one binary "
         "operation changed where only gradients fail); and naming rules (an arithmetic explanation names a "
         "failure only where the reference misses by MARGIN x its bound; a float array failing only by +-inf "
         "is no evidence; two gradients in each other's place are explained, not named). Each family was "
         "specified, and all but one written, before the fifth blind kernel existed; that kernel "
         "(tests/planted/blind5.py) was written in the same session by a helper not shown the diagnosis, who "
         "never ran it. The lead read its bug list (names, labels, descriptions) in the helper's report while "
         "the families were being finished (the search for one changed operation of the backward was written "
         "after that: it implements the issue's \"a term dropped, doubled or sign-flipped\" for every "
         "specification, not any one bug) and ran the diagnosis on it once, at commit 72c3f78: of its 1091 "
         "failed cases 408 (37.4%) were named right and 6 wrong (1.4% of the named ones), 100% localized. "
         "Its rows were then read per bug, and it became a development set: the families it showed missing "
         "were added where they are families of the arithmetic (the other ddof; amax without its absolute "
         "value; mxfp8's exponent from the other base; an optional input ignored, or read from another "
         "input's buffer; rows never processed; dx's means over part of a channel norm's axes; running_var "
         "about the running mean; add_norm's dresidual_out through the norm's backward; silu' at the input; "
         "dweight's x_hat from its block's first row), so its line above is a development figure. The sixth "
         "blind kernel (tests/planted/blind6.py) was written after that by a helper not shown the diagnosis, "
         "who never ran it and reported only counts (the lead never saw its bugs before its measurement), "
         "and measured once at commit c77f1b9: of its 1135 failed cases 616 (54.3%) were named right and 65 "
         "wrong (9.5% of the named ones; on its labelled bugs 9.3%), 100% localized. After it, its rows were "
         "read, and one name was corrected by mechanisms.py's definition: group_norm's dx means over one "
         "channel where its group belongs (`gn_bwd_sums_per_channel`, 40 of the 65 wrong names) are the group a "
         "backward reduction spans, `group`, where the search said `backward`.",
         "",
         "Session 14 used the sixth kernel as a development set (its line above is a development figure) and "
         "widened the specification search (spec_search.py) from one rounded intermediate and one backward "
         "operation to one change of the formula anywhere: an operation changed in the forward too, with the "
         "mechanism read from what the change touches (eps, a running-statistics line, the keep-mask's "
         "values, the gate's, a backward function, the parameters'; none where it is an activation value: "
         "explained, not named); an operand read from another value of its function or as its square root "
         "or square; two inputs in each other's place; a keep-mask complemented; a statistic read at the "
         "first or next index; eps moved to an operation on statistics; one expression changed at each of its "
         "places; the backward recomputing a forward value changed; a function of the specification evaluated "
         "in the lower precision. Beside it: quantized codes rounded down or up, a quantized array's index "
         "order judged by the judge's quantized test, a power-of-two block's masked lanes loaded as 1.0, and "
         "a pointer swap with the forward swapped too named affine. The seventh blind kernel "
         "(tests/planted/blind7.py) was written at the start of the session by a helper not shown the "
         "diagnosis, who never ran it and reported only counts (bugs per op and per label); the lead did not "
         "read it before its measurement, once, on the code of commit d97ed42: its line is the held-out "
         "measurement (its line above is now a development figure). Of its 864 failed cases 269 (31.1%) were "
         "named right and 60 wrong (18.2% of the named ones; on its labelled bugs 7.6%), 100% localized. "
         "The search did not generalize: on the development sets it moved the "
         "sixth kernel from 57.8% to 77.2% named right and the others by at most 3 points, and on the held-out "
         "one 31.1% are named right. 38 of its 60 wrong names are on one bug its author left unlabelled "
         "(`zs_std_output_is_variance`: the returned std is its square, which the power family calls "
         "`semantics`, as the second kernel's author labelled the same mistake for rstd); most unnamed cases "
         "are mistakes no family has (a statistic written at a row stride, a Welford count from one, "
         "num_batches_tracked advanced by the batch size, silu applied twice, a reduction over the whole "
         "tensor, one boundary row counted twice in dweight). After the measurement its rows were read "
         "(it is now a development set) and one family was added, not re-measured: a returned statistic "
         "computed apart from the values the kernel goes on with (the saved rstd without eps).",
         "",
         "Session 15 used the seventh kernel as a development set (its line above is a development figure: "
         "33.2% named right at the session's start) and added families of the arithmetic it showed missing: "
         "every `.sum` / `.mean` of the specification instrumented (a reduction over every axis or one more, "
         "a mean's sum divided by another count; the two-pass mean taken as the sum over n - 1 (bessel) or "
         "another count, with or without the variance's divisor: reduction); an integer operand of an "
         "operation on floating values read as one more or less or as one of x's sizes, named `running` on a "
         "line assigning the call's state (num_batches_tracked); the backward reading the saved mean and "
         "rstd at another index with x_hat recomputed from them (layout); a statistic written at a stride "
         "(layout); eps passed to a function moved to a named statistic (std + eps); a gradient never written "
         "(backward); another returned array in its place (explained, not named); a forward change reproducing "
         "every failing output where no change reproduces the gradients too (the specification's backward is "
         "not that of a changed forward); the SiLU applied twice "
         "(semantics, beside the SiLU left out); and the mechanism `reduction` defined for any reduction (its "
         "blocks, count or axes), not only a parameter gradient's. The eighth blind kernel "
         "(tests/planted/blind8.py) was written at the start of the session by a helper not shown the "
         "diagnosis, who never ran it and reported only counts; the lead did not read it before its "
         "measurement, once, on the code of commit 067fea0: its line is the held-out measurement. "
         "Of its 832 failed cases 265 (31.9%) were named right and 116 wrong (30.4% of the named ones; its line "
         "above is now a development figure). The search did not generalize again: the families added on the development sets "
         "moved the seventh kernel from 33.2% to 57.5% named right and the sixth from 77.2% to 81.3%, and the "
         "held-out one is at 31.9%, with more wrong names than any set before: 44 of its 116 are statistics "
         "pooled over the batch (`gn_stats_pooled_over_batch`, which the other-axes family calls another "
         "normalizer's axes, `semantics`, and its author `reduction`), 29 a prenorm dresidual taken after dx "
         "(`an_prenorm_dres_after_dx`: named `semantics`, labelled `backward`), 13 dscale / dshift averaged over "
         "the tokens (named `reduction` by the definition widened this session, labelled `backward`) and 9 the "
         "gate's gradient from x_hat (named `backward`, labelled `gate`): mostly mistakes the search explains "
         "whose mechanism the taxonomy does not decide, so that authors and rules pick different names. "
         "Session 16 wrote that decision down: docs/verdicts.md, \"Which mechanism a bug is\", sixteen rules "
         "of which the first that applies names a bug (for the diagnosis, the catalogue and the planted sets "
         "alike), and the diagnosis follows them by where a failure is (running state alone: running; the gate "
         "input's gradient alone: gate; another equation whose outputs are right: backward; the statistics "
         "pooled over the batch: reduction; a value of an eval call's running statistics: running). The eighth "
         "kernel, a development set from then on, showed the arithmetic missing these families: the backward's "
         "rstd of the next row (the last its own) or of its block's first row; the variance about each slice's "
         "first value; a reduction accumulated left to right in the 16-bit dtype (alone, or every reduction of "
         "a function); an operand read from a 16-bit buffer (a saved x_hat); the amax loop over column blocks "
         "stopping early; eps added a second time; the bias inside the weight's product; a backward's operand "
         "read from the op's forward; a reduction over a part of its slice or, `np.max` instrumented too, over "
         "the whole array. Those rules explain most of the development sets' moves in both directions: blind8 "
         "went from 31.9% to 60.5% named right, while bugs whose authors (before the rules) chose the other "
         "name now count as wrong (blind2's dz from the sigmoid alone: gate by rule 3; blind7's dweight "
         "block-boundary row: reduction; blind8's rstd hoisted per block: layout). The ninth blind kernel "
         "(tests/planted/blind9.py) was written at the start of the session by a helper not shown the "
         "diagnosis, who labelled its bugs by those rules, never ran the diagnosis and reported only counts; "
         "the lead merged it unread (a grep over the planted sets showed the ops of its four `group`-labelled "
         "bugs, not their descriptions) and measured it once, on the code of commit 57ee7f1: its line is the "
         "held-out measurement (its line above is now a development figure). Of its 948 failed cases 282 (29.7%) "
         "were named right and 11 wrong (3.8% of the named ones; on its labelled bugs 3.8%), 948 (100%) "
         "localized. Written by the rules, its labels and the diagnosis now disagree "
         "rarely (3.8% of the named, from 30.4% on the eighth), and 100% of its failures are localized, but the "
         "search explains less than a third: the families the eighth kernel showed missing are not the ninth's "
         "(its unexplained bugs are mostly other arithmetic: the backward's projection from sum(g x), each "
         "group's statistics from its first channel, the statistics per quantization block, the backward's "
         "rstd from the running variance, a bias read at the row index, sums overflowing in the 16-bit dtype). "
         "After the measurement (blind9 a development set) a review moved two rules (the running statistics' "
         "rule for an eval call's forward only; the statistics over the op's axes and more a reduction only "
         "where they are no other normalizer's: instance statistics over the channels are layer_norm's axes) "
         "and added the families of five of its bugs (ddof's sign: bessel; a row's reduction without its last "
         "columns: block; a gradient that is another array of the step: backward; every reduction over groups "
         "of k contiguous values, or the forward's from each slice's first k values, a group's first channel: "
         "group). "
         "Session 17: the tenth blind kernel (tests/planted/blind10.py), written at the start of the session by "
         "a helper not shown the diagnosis, labelled by the rules, merged unread and measured once on the code "
         "of commit d31bdb5 (which held four families added on the ninth: x_hat read uncentred in the "
         "backward's projection, a training backward's rstd from the running variance, a group norm's backward "
         "over every group, the statistics per quantization block): of its 995 failed cases 368 (37.0%) were "
         "named right and 48 wrong (11.5% of the named ones), 995 (100%) localized. Of its wrong names 24 "
         "were the diagnosis breaking rule 11 (a parameter gradient averaged over two samples named `constant` "
         "for its bare 1/2, where a count's average is `reduction`: fixed) and 10 batch statistics of the first "
         "sample named `block`, which its author called `reduction`; the eleventh kernel's author called the "
         "same kind of mistake (a tail block of samples skipped) `block`, and rule 9 now says so in words (a "
         "batch statistic's loop over the samples stopping early), so these count as wrong on the tenth. As a "
         "development set it showed these families missing, now added (docs/"
         "verdicts.md lists them): the group count misread as group count and size swapped, its statistics of "
         "the other shape written in the kernel's own order; a returned per-sample array written without its "
         "leading offset; the weight applied to x before the statistics; the backward's g = dy * weight "
         "applied after the projection; batch statistics of the first sample(s), or merged from per-sample "
         "(or, for the group norms, per-channel) partials with the between term unweighted or left out; "
         "chunks merged with equal weights; 16-bit accumulators adding rounded terms; the mean's first pass "
         "in 16-bit never re-centred; the deviations x - mean in 16-bit; the statistics read at another "
         "sample's or group's index in the backward's recomputation of the forward; poly_norm's powers "
         "normalized otherwise and its backward's terms (refnorm/check/explain_poly.py); add_norm's dropout "
         "at another point; dyt's alpha outside the tanh and its bias at the row's index; eps / n. Two "
         "changes protect the wrong-name rate: a catalogue match that holds only within its rounding "
         "interval is withdrawn where an exact explanation of another named mechanism fits every failing "
         "array (both unnamed where the reference misses by less than MARGIN), and a change that makes a "
         "failing array non-finite everywhere is no explanation of it (a division by zero matches any NaN). "
         "The eleventh blind kernel (tests/planted/blind11.py) was written meanwhile by a helper not shown "
         "the diagnosis nor these families, labelled by the rules; the lead merged it unread and measured it "
         "once, on the code of commit 4fa45fe: of its 945 failed cases 451 (47.7%) were named right and 75 "
         "wrong (14.3% of the named ones; on its labelled bugs 14.1%), 945 (100%) localized (its line above is "
         "now a development figure). The best held-out rate so far (29.7% on the ninth, 37.0% on the tenth), "
         "still far from the 85% the issue asks, and too many wrong names: 42 of the 75 are one bug (a "
         "training backward's dweight from the running statistics' x_hat) that its author called `backward` "
         "and the diagnosis `mode`, as the ninth kernel's author called a training backward's rstd from the "
         "running variance; rule 14 now says a training call computing with the running statistics is `mode`, "
         "so they stay wrong against their label; 10 are the batch samples above (`reduction` then, `block` "
         "now); 13 were fixed after the measurement (gated_norm's mean over the whole row: the group count, "
         "`group`; dyt's alpha rounded to bfloat16: `precision`, not the affine's cast order), with the "
         "families of nine of its unexplained bugs (poly_norm's chain factor p x^p and dbias 3 sum(dy); a "
         "tile's padded zeros counted in the statistics; a gradient's rows one row early; a returned mean "
         "averaged over the batch; the gate z of the first group for every group; dx without 1/(1 - p)). The "
         "table above is the code after those changes (the eleventh kernel's line a development figure).",
         "",
         "Session 18 used the eleventh kernel as a development set, and found first a defect of the "
         "localization itself: an element of a 16-bit array was counted as failing where |got - ref| exceeded "
         "its bound, while the judge tests the reals that round to got (its rounding interval), so the "
         "localization over-counted the failing elements of 16-bit arrays (a bfloat16 dresidual of four rows, "
         "the last one right, reported as 128 of 128 elements beyond their bound) and the re-indexing families "
         "judged rows by that test; localize.failing_mask now tests as the judge does. The session added (docs/"
         "verdicts.md lists them): an explanation's bound grown by its value where that is larger than the "
         "reference's (at most 4x, never where the grown bound would hold the reference); a lower precision "
         "than the declared contract (every failing array within the bounds of the case under float32 "
         "arithmetic, or with its statistics or every intermediate in the 16-bit dtype, its error noise-like "
         "and two-sided, no statistic or quantized array failing: `precision`); a running buffer read from "
         "another's or at the first channel (`running`); one parameter read from another role's buffer "
         "(`layout`, rule 12; one of the same role, weight for weight1, stays `affine`); an input of a 32/64-bit "
         "case loaded through a 16-bit pointer; the backward's dy read in another index order; a parameter "
         "read at a tile's local index; batch statistics from the first k samples; eps left out where a "
         "function takes it; a per-sample parameter's gradient missing some tokens' terms; float32's machine "
         "epsilon as a default eps. The twelfth and thirteenth blind kernels (tests/planted/blind12.py, 42 "
         "bugs in layer_norm, rms_norm, add_norm, batch_norm, group_norm, instance_norm, z_score and "
         "lp_normalize; tests/planted/blind13.py, 44 bugs in the other seven ops) were written at the start of "
         "the session by two helpers, each in its own worktree, not shown the diagnosis nor these families, "
         "labelled by the rules, who never ran the diagnosis and reported only counts; the lead merged them "
         "unread after the last change of the diagnosis and measured each once, on the code of commit 12c8846: "
         "their lines above are held-out measurements (the other lines were measured at bb48099, whose one "
         "change of the diagnosis since, a size cap on the lower-precision explanation, reaches no golden "
         "case). Twelfth: of its 892 failed cases 637 (71.4%) were named right and 38 wrong (5.6% of the named "
         "ones; on its labelled bugs 2.0%). Thirteenth: of its 733 failed cases 387 (52.8%) were named right and "
         "10 wrong (2.5% of the named ones; on its labelled bugs 2.5%). The best held-out figures so "
         "far (the eleventh: 47.7% right, 14.3% wrong), still short of the issue's 85% and 2%; 25 of the "
         "twelfth's 38 wrong names are its one unlabelled bug (an rstd output holding the mean square, which "
         "the diagnosis calls `semantics`). After the measurement, with both kernels development sets, the "
         "families of seven of their bugs were added (docs/verdicts.md lists them: the backward's saved mean "
         "and rstd read from each other's buffers, or any function argument from another's; a scalar-like "
         "input read from the leading values of another's buffer; dyt's alpha read as its initial value; a "
         "row's amax by a warp butterfly missing steps; x never centred; a count read as the tile's width). "
         "Both lines above are development figures since (measured on this table's code).",
         "",
         "Session 19 used the twelfth and thirteenth kernels as development sets and added (docs/verdicts.md lists "
         "them): partial variances merged without the spread of their means (a channel's, a sample's, a block's "
         "or a warp lane's: `one_pass`, rule 7); every mean over n values, forward and backward, divided by another "
         "count (a group's length read as the row's: `group`); a returned array holding one index's value along an "
         "axis (`layout`); a gradient off by a cotangent's term (`backward`); the backward's statistics unpacked "
         "from the saved tuple (gated_norm's vhat, poly_norm's per-power lists) read at another index, the "
         "transposed index among them, or saved in a 16-bit buffer; the backward's x_hat recomputed from y / weight "
         "with the weight at another index; a block scale clamped below at 1; a tail block's mask taken block-local. "
         "Two decisions of the rules, each where the planted sets' authors had disagreed: a returned statistic at "
         "another stage of its finalization (the variance for the std) is explained without a mechanism (three of "
         "the four authors who wrote one left it unlabelled), and partials merged without their means' spread are "
         "rule 7's one_pass (the second kernel's author said merge: accepted beside it). The fourteenth and "
         "fifteenth blind kernels (tests/planted/blind14.py, 43 bugs in layer_norm, rms_norm, add_norm, norm_quant, "
         "gated_norm, dyt and poly_norm; tests/planted/blind15.py, 44 bugs in the other eight ops) were written at "
         "the start of the session by two helpers, each in its own worktree, not shown the diagnosis nor these "
         "families, labelled by the rules, who never ran the diagnosis and reported only counts; the lead merged "
         "them unread (mending the merge of tests/test_blind.py showed three bug-name prefixes of the fourteenth's "
         "poly_norm entries, nothing else) and measured each once, on the diagnosis of commit 249b383. Fourteenth: "
         "of its 813 failed cases 417 (51.3%) named right and 29 wrong (6.5% of the named ones; on its labelled bugs "
         "6.3%). Fifteenth: of its 1064, 630 (59.2%) right and 42 wrong (6.2%; 5.4%). Together 55.8% named right "
         "and 6.4% wrong (1877 failed cases), 100% localized: below the twelfth and thirteenth (63.0% right, 4.5% wrong), "
         "the families of the development sets again not the held-out sets' (their unexplained bugs: a sum of "
         "squares never divided by n, dweight's tail rows clamped to the last row, one lp norm for the whole "
         "tensor, a warp's strided Welford lanes merged without their spread, a row sum by a warp butterfly "
         "missing a step, dbias from dy * weight, a quantizer's input y stored in the 16-bit dtype and named a "
         "scale's mistake). After the measurement, with both kernels development sets, the families of those "
         "bugs were added (docs/verdicts.md) with partial sums rounded to the 16-bit dtype per block or per "
         "sample, an nvfp4 block scale rounded up, and y stored in the 16-bit dtype before a quantizer named "
         "`precision` (rule 8; the first blind kernel's author said quant_scale: accepted beside it). A review "
         "then found two defects: this session's families had pushed the operand reads past the mutation "
         "search's cap of 1000 evaluations on some 16-bit group_norm_silu cases (named `precision` by the "
         "lower-precision fallback instead of `backward`): the rarer families are now tried last, under a cap of "
         "1500; and session 18's family of a scalar-like input read from another input's first values (up to "
         "four) named a four-channel bias read from x on cases whose SiLU saturates: one value only now. "
         + AFTER_19,
         "",
         "Session 20 used the fourteenth and fifteenth kernels as development sets (their lines above are "
         "development figures) and changed how an explanation is judged as well as adding families "
         "(docs/verdicts.md lists them): an input or configuration deviation is judged within the bound the "
         "check derives at the deviation's own point (a kernel computing that arithmetic rounds where its values "
         "lie: a SiLU's slope at the deviated p, a mean of 1e3), and a change of the specification that takes the "
         "failing arrays at least 64 times closer than the reference within the bound grown by its own "
         "arithmetic's conditioning (its values at inputs moved by one unit of the working precision, and its "
         "own rounding), named only where every such near miss agrees on one mechanism and no change fits "
         "plainly; a block scale's explained value is judged on the check's grid (e8m0's rounding rule); the "
         "families: a mean of squares or variance held in the 16-bit dtype before its root; the one-pass variance "
         "E[x^2] - E[x]^2 in the working precision for every op summing its squared deviations; a tile's padded "
         "lanes counted in the variance; a gradient's sum over index 0 of one axis alone (a scalar's gradient of "
         "one column); a flag the backward alone reads the other way (eps's placement: `eps`); the gate input's "
         "gradient alone wrong (rule 3 names any deviation of dz alone: `gate`, by where it fails); dyt's tanh "
         "derivative written otherwise; a static quantizer scale ignored or read as an amax, an absent scale_ub "
         "read as 0, nvfp4's tensor amax from another tensor; a backward's grid of P programs rounded down; one "
         "row's terms alone in a short sum; dx's projection mean over n - 1 (`bessel`); two keep-masks exchanged "
         "(`dropout`). The sixteenth and seventeenth blind kernels (tests/planted/blind16.py, 42 bugs in "
         "layer_norm, rms_norm, add_norm, norm_quant, gated_norm, dyt and poly_norm; tests/planted/blind17.py, 43 "
         "bugs in the other eight ops) were written at the start of the session by two helpers, each in its own "
         "worktree, not shown the diagnosis nor these changes, labelled by the rules, who never ran the diagnosis "
         "and reported only counts; the lead merged them unread after the development was finished (mending the "
         "merge of tests/test_blind.py showed five bug names, three of the sixteenth's poly_norm and two of the "
         "seventeenth's batch_norm, nothing else) and measured each once, on this table's code: their lines above "
         "are those held-out measurements. Sixteenth: " + held_out(I_) + " Seventeenth: " + held_out(H_)
         + " Together " + line_pct(I_ + H_) + ": no better than the fourteenth and fifteenth at their measurement "
         "(55.8% right, 6.4% wrong), though the development sets gained (the fourteenth and fifteenth 73.9% -> "
         "80.3% right, 2.1% wrong, on this code). Read after the measurement: 48 of the 84 wrong names are two of the sixteenth's "
         "bugs (rstd returned as 1 / (mean square + eps), labelled semantics, named eps; dy * weight rounded to the "
         "16-bit dtype in the backward, labelled precision, named affine), and the largest unexplained are returned "
         "statistics at another stage (rstd holding rms, the variance: unlabelled), a warp's Welford partials "
         "merged with equal counts, a running-statistics update applied twice, a SiLU flag's default, a sigmoid "
         "by tanh's half angle, a backward reading dy channels_last.",
         "",
         "Session 21 used the sixteenth and seventeenth kernels as development sets (their lines above are "
         "development figures: " + line_pct(I_ + H_) + " on this code, from 54.3% right and 7.3% wrong at their "
         "measurement) and added families of the arithmetic they showed missing (docs/verdicts.md lists them): a "
         "root read as its square (the rstd's root left out: another equation, though eps sits under the root); "
         "the running statistics updated twice with one batch's; an input or cotangent read in another index "
         "order of its shape (dy's NCHW memory with channels_last strides) or at the next or previous row; an "
         "activation the call did not ask for applied after the norm, forward and backward; one sum divided by "
         "its count; channels, slices, elements or each slice's vector tail that a launch grid never processes "
         "(refnorm/check/explain_grid.py); batch_norm's parameter gradients without some samples' terms; a "
         "parameter gradient's running sums, or a partial buffer of a group's width; a warp's strided lanes merged "
         "with equal-weight means, one warp's slot of a block's partials; a row's block scales written at row "
         "0's offset. How an explanation is judged changed too: a change's conditioning from two perturbations "
         "of independent signs; an unnamed fit no longer stops the next search; the specifications' own overflow "
         "scaling (x / s) is never changed; a value of the cotangent and the weight is no value of the parameters "
         "alone; eps itself rounded is eps's value. The eighteenth and nineteenth blind kernels "
         "(tests/planted/blind18.py, 43 bugs in layer_norm, rms_norm, add_norm, norm_quant, gated_norm, dyt and "
         "poly_norm; tests/planted/blind19.py, 43 bugs in the other eight ops) were written at the start of the "
         "session by two helpers, each in its own worktree, not shown the diagnosis nor these changes, labelled "
         "by the rules, who never ran the diagnosis and reported only counts; the lead merged them unread after "
         "the development was finished (the merge of tests/test_blind.py mended by a script that split its "
         "interleaved dicts by op and printed only counts: no bug was read) and measured each once, on this "
         "table's code: their lines above are those held-out measurements. Eighteenth: " + held_out(G_)
         + " Nineteenth: " + held_out(F_) + " Together " + line_pct(G_ + F_) + "." + READ_21,
         "",
         "Blind kernel (tests/planted/blind.py, written by a helper who was not shown the diagnosis, the pitfall "
         "variants or this document; each bug from a public kernel's history, labelled with its mechanism by "
         "its author): " + "; ".join(f"`{b}` ({BLIND[b][0]}: {BLIND[b][2]}; {BLIND[b][1] or 'no label'})"
                                     for b in BLIND) + ".",
         "",
         "Second blind kernel (tests/planted/blind2.py, ten ops, written by another helper not shown the "
         "diagnosis, after the diagnosis's issue-33 rules were built; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND2[b][0]}: {BLIND2[b][2]}; {BLIND2[b][1] or 'no label'})" for b in BLIND2) + ".",
         "",
         "Third blind kernel (tests/planted/blind3.py, 13 ops, labels from refnorm's whole list of mechanisms, "
         "written by a third helper not shown the diagnosis; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND3[b][0]}: {BLIND3[b][2]}; {BLIND3[b][1] or 'no label'})" for b in BLIND3) + ".",
         "",
         "Fourth blind kernel (tests/planted/blind4.py, 13 ops, labels from refnorm's whole list of mechanisms, "
         "written by a fourth helper not shown the diagnosis; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND4[b][0]}: {BLIND4[b][2]}; {BLIND4[b][1] or 'no label'})" for b in BLIND4) + ".",
         "",
         "Fifth blind kernel (tests/planted/blind5.py, 15 ops, labels from refnorm's whole list of mechanisms, "
         "written by a fifth helper not shown the diagnosis, who never ran it on these bugs; measured once, at the "
         "end): "
         + "; ".join(f"`{b}` ({BLIND5[b][0]}: {BLIND5[b][2]}; {BLIND5[b][1] or 'no label'})" for b in BLIND5) + ".",
         "",
         "Sixth blind kernel (tests/planted/blind6.py, 15 ops, labels from refnorm's whole list of mechanisms, "
         "written by a sixth helper not shown the diagnosis, who never ran it on these bugs; measured once, at the "
         "end): "
         + "; ".join(f"`{b}` ({BLIND6[b][0]}: {BLIND6[b][2]}; {BLIND6[b][1] or 'no label'})" for b in BLIND6) + ".",
         "",
         "Seventh blind kernel (tests/planted/blind7.py, 15 ops, labels from refnorm's whole list of mechanisms, "
         "written by a seventh helper not shown the diagnosis, who never ran it on these bugs and reported only "
         "counts; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND7[b][0]}: {BLIND7[b][2]}; {BLIND7[b][1] or 'no label'})" for b in BLIND7) + ".",
         "",
         "Eighth blind kernel (tests/planted/blind8.py, 15 ops, labels from refnorm's whole list of mechanisms, "
         "written by an eighth helper not shown the diagnosis, who never ran it on these bugs and reported only "
         "counts; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND8[b][0]}: {BLIND8[b][2]}; {BLIND8[b][1] or 'no label'})" for b in BLIND8) + ".",
         "",
         "Ninth blind kernel (tests/planted/blind9.py, 15 ops, labelled by docs/verdicts.md's \"Which mechanism a "
         "bug is\", written by a ninth helper not shown the diagnosis, who never ran it on these bugs and reported "
         "only counts; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND9[b][0]}: {BLIND9[b][2]}; {BLIND9[b][1] or 'no label'})" for b in BLIND9) + ".",
         "",
         "Tenth blind kernel (tests/planted/blind10.py, 15 ops, labelled by docs/verdicts.md's \"Which mechanism a "
         "bug is\", written by a tenth helper not shown the diagnosis, who never ran it on these bugs and reported "
         "only counts; measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND10[b][0]}: {BLIND10[b][2]}; {BLIND10[b][1] or 'no label'})" for b in BLIND10) + ".",
         "",
         "Eleventh blind kernel (tests/planted/blind11.py, 15 ops, labelled by docs/verdicts.md's \"Which mechanism "
         "a bug is\", written by an eleventh helper not shown the diagnosis, who never ran it on these bugs and "
         "reported only counts; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND11[b][0]}: {BLIND11[b][2]}; {BLIND11[b][1] or 'no label'})" for b in BLIND11) + ".",
         "",
         "Twelfth blind kernel (tests/planted/blind12.py, 8 ops, labelled by docs/verdicts.md's \"Which mechanism "
         "a bug is\", written by a twelfth helper not shown the diagnosis, who never ran it on these bugs and "
         "reported only counts; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND12[b][0]}: {BLIND12[b][2]}; {BLIND12[b][1] or 'no label'})" for b in BLIND12) + ".",
         "",
         "Thirteenth blind kernel (tests/planted/blind13.py, the other 7 ops, written beside the twelfth by a "
         "thirteenth helper under the same rules; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND13[b][0]}: {BLIND13[b][2]}; {BLIND13[b][1] or 'no label'})" for b in BLIND13) + ".",
         "",
         "Fourteenth blind kernel (tests/planted/blind14.py, 7 ops, labelled by docs/verdicts.md's \"Which "
         "mechanism a bug is\", written by a fourteenth helper not shown the diagnosis, who never ran it on these "
         "bugs and reported only counts; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND14[b][0]}: {BLIND14[b][2]}; {BLIND14[b][1] or 'no label'})" for b in BLIND14) + ".",
         "",
         "Fifteenth blind kernel (tests/planted/blind15.py, the other 8 ops, written beside the fourteenth by a "
         "fifteenth helper under the same rules; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND15[b][0]}: {BLIND15[b][2]}; {BLIND15[b][1] or 'no label'})" for b in BLIND15) + ".",
         "",
         "Sixteenth blind kernel (tests/planted/blind16.py, 7 ops, labelled by docs/verdicts.md's \"Which "
         "mechanism a bug is\", written by a sixteenth helper not shown the diagnosis, who never ran it on these "
         "bugs and reported only counts; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND16[b][0]}: {BLIND16[b][2]}; {BLIND16[b][1] or 'no label'})" for b in BLIND16) + ".",
         "",
         "Seventeenth blind kernel (tests/planted/blind17.py, the other 8 ops, written beside the sixteenth by a "
         "seventeenth helper under the same rules; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND17[b][0]}: {BLIND17[b][2]}; {BLIND17[b][1] or 'no label'})" for b in BLIND17) + ".",
         "",
         "Eighteenth blind kernel (tests/planted/blind18.py, 7 ops, labelled by docs/verdicts.md's \"Which "
         "mechanism a bug is\", written by an eighteenth helper not shown the diagnosis, who never ran it on these "
         "bugs and reported only counts; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND18[b][0]}: {BLIND18[b][2]}; {BLIND18[b][1] or 'no label'})" for b in BLIND18) + ".",
         "",
         "Nineteenth blind kernel (tests/planted/blind19.py, the other 8 ops, written beside the eighteenth by a "
         "nineteenth helper under the same rules; merged unread and measured once, at the end): "
         + "; ".join(f"`{b}` ({BLIND19[b][0]}: {BLIND19[b][2]}; {BLIND19[b][1] or 'no label'})" for b in BLIND19) + ".",
         "",
         "Per bug of the second kernel and the blind kernels at M = MARGIN (failed cases: named right / named wrong / not "
         "named; localized):", ""]
    for b in list(BUGS) + list(BLIND) + list(BLIND2) + list(BLIND3) + list(BLIND4) + list(BLIND5) + list(BLIND6) \
            + list(BLIND7) + list(BLIND8) + list(BLIND9) + list(BLIND10) + list(BLIND11) + list(BLIND12) + list(BLIND13) \
            + list(BLIND14) + list(BLIND15) + list(BLIND16) + list(BLIND17) + list(BLIND18) + list(BLIND19):
        rs = [r for r in T + X + Y + Z + W + V + U + S + R + Q + P_ + O_ + N_ + L_ + K_ + J_ + I_ + H_ + G_ + F_
              if r["bug"] == b]
        n, right, wrong, *_ = score(rs, MARGIN)
        wrong_as = sorted({r["mech"] for r in rs if r["conf"] is not None and r["conf"] >= MARGIN
                           and r["mech"] not in r["expected"]})
        loc = sum(bool(r.get("localized")) for r in rs)
        L.append(f"* `{b}`: {n} failed; {right} / {wrong} / {n - right - wrong}; {loc}"
                 + (f" (wrongly named: {', '.join(wrong_as)})" if wrong_as else ""))
    L += ["", f"Measured in {seconds:.0f} s on this machine.", "", END]
    return "\n".join(L)


def write(text, path=report.DOC, section7=None):
    doc = open(path).read()
    if section7 is not None:        # section 7 from the same runs (report.diagnosis_section, cached here)
        a, b = doc.index("## 7. Diagnosis"), doc.index("## 8. Beyond")
        doc = doc[:a] + "\n".join(section7) + "\n" + doc[b:]
    if BEGIN in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    open(path, "w").write(doc)


def section(doc):
    return doc[doc.index(BEGIN):doc.index(END) + len(END)] if BEGIN in doc else ""


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", help="JSON of the per-case rows: read if it exists, else written")
    ap.add_argument("--out", default=report.DOC)
    ap.add_argument("--torch-only", action="store_true", help="only the torch kernel's rows, into --cache")
    ap.add_argument("--score", nargs="+", choices=sorted(HELD_OUT),
                    help="only print these held-out kernels' lines (nothing written)")
    a = ap.parse_args()
    t = time.time()
    if a.score:
        for k in a.score:
            rows = HELD_OUT[k]()
            print(line(k, rows, MARGIN))
            if k == "blind2":
                own = [dict(r, expected=r["expected"][:1] if BLIND2[r["bug"]][1] else []) for r in rows]
                print(line("blind2, the author's labels alone", own, MARGIN))
        sys.exit(0)
    if a.torch_only:
        json.dump({"rows": torch_rows() + blind_rows() + blind2_rows() + blind3_rows() + blind4_rows() + blind5_rows() + blind6_rows() + blind7_rows() + blind8_rows() + blind9_rows() + blind10_rows() + blind11_rows() + blind12_rows() + blind13_rows() + blind14_rows() + blind15_rows() + blind16_rows() + blind17_rows() + blind18_rows() + blind19_rows() + blind20_rows() + blind21_rows() + blind22_rows() + blind23_rows() + blind24_rows() + blind25_rows() + blind26_rows() + blind27_rows() + blind28_rows() + blind29_rows() + blind30_rows() + blind31_rows() + blind32_rows() + blind33_rows(), "seconds": time.time() - t}, open(a.cache, "w"))
        sys.exit(0)
    if a.cache and os.path.exists(a.cache):      # {"rows", "seconds"}, or torch rows of --torch-only
        got = json.load(open(a.cache))
        rows, secs, seven = got["rows"], got["seconds"], None
    else:
        rows = emulated_rows()
        seven = report.diagnosis_section()
        part = (a.cache or "") + ".torch"
        if os.path.exists(part):              # the torch rows computed by a parallel --torch-only run
            got = json.load(open(part))
            rows, secs = rows + got["rows"], time.time() - t + got["seconds"]
        else:
            rows += torch_rows() + blind_rows() + blind2_rows() + blind3_rows() + blind4_rows() + blind5_rows() + blind6_rows() + blind7_rows() + blind8_rows() + blind9_rows() + blind10_rows() + blind11_rows() + blind12_rows() + blind13_rows() + blind14_rows() + blind15_rows() + blind16_rows() + blind17_rows() + blind18_rows() + blind19_rows() + blind20_rows() + blind21_rows() + blind22_rows() + blind23_rows() + blind24_rows() + blind25_rows() + blind26_rows() + blind27_rows() + blind28_rows() + blind29_rows() + blind30_rows() + blind31_rows() + blind32_rows() + blind33_rows()
            secs = time.time() - t
        if a.cache:
            json.dump({"rows": rows, "seconds": secs}, open(a.cache, "w"))
    write(render(rows, secs), a.out, seven)
    print(re.sub(r"\n\n+", "\n", render(rows, secs)))
