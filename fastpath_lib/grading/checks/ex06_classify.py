"""Exercise 06: classifying results, on a synthetic table (and the data exercise 07 writes its note from).

``my_classify(row) -> "win" | "neutral" | "loss" | "fallback"`` is checked on the fixed synthetic table of the notebook
and on a table drawn afresh at every call (new case ids and numbers), so a lookup of the fixed table's answers does not
pass. Every drawn table holds points just inside and just outside the noise band, the band set by either side's spread,
so a rule without the band, or with another band, fails every draw, and the kit's rule passes every draw however its
arithmetic is written (:func:`drawn_results`). The rule is the kit's one rule
(:func:`~fastpath_lib.grading.vocabulary.outcome`, with the noise band of :mod:`fastpath_lib.bench.analysis`); calling
it, or the grader's helpers, from the classifier fails.
"""

from __future__ import annotations

import random
from collections import Counter

from fastpath_lib.grading.given import expected_classes
from fastpath_lib.grading.materials import results_frame, synthetic_results
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, graded, part, table
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, OUTCOMES, WIN

__all__ = ["check_classification", "drawn_results"]

_GRADER = borrowed.kit("grading", why="that is the grader's own answer") + borrowed.kit(
    "bench", why="that is the kit's own classification rule")


#: how far drawn points sit from the band's edge, in units of the band: inside (neutral) and just outside (win, loss)
_INSIDE, _OUTSIDE = (0.88, 0.96), (1.04, 1.10)


def _edge_row(rng, want: str, side: int, dominant: str):
    """Time ratio and relative spreads of a point near the band's edge: ``want`` is neutral (inside, a wide band of
    6-15 %) or win or loss (just outside, a narrow band of 1-4 %), on the win side (``side`` -1) or the loss side (+1);
    the ``dominant`` side's spread sets the band and the other's is a fifth of it or less, so a band read from one side
    only, or from their mean, their sum or the smaller, decides otherwise. A threshold that ignores the band cannot sit
    below every inside point and above every outside one. An inside point on the win side sits close enough to the
    edge (``u > 1 / (1 + band)``) that a speed-up ``b / c`` held against ``1 + band``, or the candidate's spread taken
    relative to the baseline's median, calls it a win."""
    band = rng.uniform(0.06, 0.15) if want == NEUTRAL else rng.uniform(0.01, 0.04)
    lo, hi = _INSIDE if want == NEUTRAL else _OUTSIDE
    if want == NEUTRAL and side < 0:
        lo = max(lo, 1 / (1 + band) + 0.005)
    ratio = 1 + side * band * rng.uniform(lo, hi)
    other = band * rng.uniform(0.1, 0.2)
    fb, fc = (band, other) if dominant == "baseline" else (other, band)
    return ratio, fb, fc


def drawn_results(seed: int | None = None):
    """A synthetic table drawn at random (new case ids and numbers). Rows of every outcome well clear of the noise
    band's edges, fallback rows whose timings say otherwise, and points just inside and just outside the band, with
    the band set by the baseline's spread in some and the candidate's in others (:func:`_edge_row`). Each drawn point
    is kept only when, read from its rounded numbers, it sits at least a twentieth of the band away from the edge: no
    correct rule, however its arithmetic is ordered, decides one of them otherwise. ``seed=None`` draws a fresh one."""
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    wants = [(w, 0, None) for w in (WIN, WIN, NEUTRAL, NEUTRAL, LOSS, LOSS, FALLBACK, FALLBACK, FALLBACK)]
    wants += [(w, side, d) for w, side in ((WIN, -1), (NEUTRAL, -1), (NEUTRAL, 1), (LOSS, 1))
              for d in ("baseline", "candidate")]
    rows = []
    for i, (want, side, dominant) in enumerate(rng.sample(wants, len(wants))):
        while True:
            b = round(rng.uniform(5, 500), 2)
            if dominant is not None:
                ratio, fb, fc = _edge_row(rng, want, side, dominant)
            else:
                fb, fc = rng.uniform(0.01, 0.15), rng.uniform(0.01, 0.15)
                band = max(fb, fc)
                ratio = {WIN: rng.uniform(0.3, 1 - band - 0.05), LOSS: rng.uniform(1 + band + 0.05, 2.5),
                         NEUTRAL: rng.uniform(1 - band * 0.5, 1 + band * 0.5), FALLBACK: rng.uniform(0.5, 1.5)}[want]
            c = round(b * ratio, 4)
            bs, cs = round(b * fb, 4), round(c * fc, 4)
            band, r = max(bs / b, cs / c), c / b
            if want == FALLBACK or min(abs(r - 1 + band), abs(r - 1 - band)) >= band / 20:
                break
        cid = f"d{i + 1:02d}_{rng.choice((1, 64, 512, 2048, 8192))}x{rng.choice((128, 1000, 4096))}"
        rows.append((cid, "fallback" if want == FALLBACK else "triton", b, bs, c, cs))
    return results_frame(rows, "SYNTHETIC table drawn at random by the check, not a measurement")


def _classified(my_classify, df) -> dict:
    return {r["case_id"]: borrowed.run(my_classify, (r,), _GRADER) for _, r in df.iterrows()}


def _classification(tables, my_classify) -> None:
    problems = []
    for name, df in tables:
        exp, yours = expected_classes(df), _classified(my_classify, df)
        bad = sum(yours[c] != exp[c] for c in exp)
        if bad:
            rows = [(c, yours[c], exp[c], "" if yours[c] == exp[c] else "<-- differs") for c in exp]
            problems.append(f"{name}: {bad} of {len(exp)} cases classified differently\n"
                            + table(rows, ("case", "yours", "expected", "")))
    if problems:
        raise Fail("\n".join(problems))


def _counts(tables, my_classify) -> str:
    for name, df in tables:
        yours, want = Counter(_classified(my_classify, df).values()), Counter(expected_classes(df).values())
        if yours != want:
            raise Fail(f"{name}: counts yours {dict(sorted(yours.items()))} vs expected "
                       f"{dict(sorted(want.items()))}")
    want = Counter(expected_classes(tables[0][1]).values())
    return "counts: " + ", ".join(f"{k}={want[k]}" for k in OUTCOMES)


def _grade(tables, my_classify) -> list[Result]:
    """The two parts, each judged on its own."""
    return [part("ex06", "classification", _classification, tables, my_classify),
            part("ex06", "summary_counts", _counts, tables, my_classify)]


def check_classification(my_classify, *, show: bool = True):
    """``my_classify(row) -> "win" | "neutral" | "loss" | "fallback"`` on the synthetic table and a freshly drawn
    one."""
    tables = (("the notebook's table", synthetic_results()), ("a table drawn now", drawn_results()))
    return graded("ex06", ("classification", "summary_counts"), _grade, tables, my_classify, show=show)
