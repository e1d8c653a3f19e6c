"""What one exercise is given as the answer of another: exercise 07 writes its note from exercise 06's classes.

In the grader's sandbox the learner's kernel is handed this module only where the notebook's given cells read one of
its names (exercise 07: :func:`fastpath_lib.grading.engine.sandbox.handouts`): elsewhere :func:`expected_classes` is
exercise 06's answer key.

>>> from fastpath_lib.grading.materials import synthetic_results
>>> expected_classes(synthetic_results())["c09_512x4096_fp16_small"]
'fallback'
"""

from __future__ import annotations

from fastpath_lib.grading.vocabulary import FALLBACK, outcome

__all__ = ["expected_classes"]


def _expected_class(row) -> str:
    if row["route"] == "fallback":
        return FALLBACK
    b, c = row["baseline_median_us"], row["candidate_median_us"]
    return outcome(c / b, max(row["baseline_spread_us"] / b, row["candidate_spread_us"] / c))


def expected_classes(df) -> dict[str, str]:
    """The classification of each case by the kit's rule (the answer of exercise 06, given to exercise 07)."""
    return {r["case_id"]: _expected_class(r) for _, r in df.iterrows()}
