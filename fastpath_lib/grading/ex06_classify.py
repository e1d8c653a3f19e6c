"""Exercise 06: classifying results, on a synthetic table (and the data exercise 07 writes its note from).

``my_classify(row) -> "win" | "neutral" | "loss" | "fallback"`` is checked on the fixed synthetic table of the
notebook and on a table drawn afresh at every call (new case ids and numbers), so a lookup of the fixed table's
answers does not pass. The rule is the kit's one rule (:func:`~fastpath_lib.grading.vocabulary.outcome`, with the
noise band of :mod:`fastpath_lib.bench.analysis`); calling it, or the grader's helpers, from the classifier fails.
"""

from __future__ import annotations

import random
from collections import Counter

from fastpath_lib.grading import borrowed
from fastpath_lib.grading.feedback import Fail, graded, part, table
from fastpath_lib.grading.given import expected_classes
from fastpath_lib.grading.materials import results_frame, synthetic_results
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, OUTCOMES, WIN

__all__ = ["check_classification", "drawn_results"]

_GRADER = borrowed.kit("grading", why="that is the grader's own answer") + borrowed.kit(
    "bench", why="that is the kit's own classification rule")


def drawn_results(seed: int | None = None):
    """A synthetic table drawn at random (new case ids and numbers): three cases of each outcome, well clear of the
    noise band's edges. ``seed=None`` draws a fresh one."""
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    rows = []
    for i, want in enumerate(rng.sample(list(OUTCOMES) * 3, 3 * len(OUTCOMES))):
        b = round(rng.uniform(5, 500), 2)
        fb, fc = rng.uniform(0.01, 0.15), rng.uniform(0.01, 0.15)
        band = max(fb, fc)
        ratio = {WIN: rng.uniform(0.3, 1 - band - 0.05), LOSS: rng.uniform(1 + band + 0.05, 2.5),
                 NEUTRAL: rng.uniform(1 - band * 0.5, 1 + band * 0.5), FALLBACK: rng.uniform(0.5, 1.5)}[want]
        c = round(b * ratio, 4)
        cid = f"d{i + 1:02d}_{rng.choice((1, 64, 512, 2048, 8192))}x{rng.choice((128, 1000, 4096))}"
        rows.append((cid, "fallback" if want == FALLBACK else "triton", b, round(b * fb, 4), c, round(c * fc, 4)))
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
