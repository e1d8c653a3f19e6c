"""Full marks on solutions/: every solution notebook graded as a learner's would be (its kernel in the sandbox where
it starts), every part passed. A file of its own: the longest single job of the suite, it runs on one worker while
test_grading.py's other notebook runs go on another."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")  # the notebook packages are absent on a bare GPU machine

from fastpath_lib.grading.engine import sandbox  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES  # noqa: E402
from tests.solved import grade_unchanged  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("ex[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def solution_grades():
    return grade_unchanged(SOLUTIONS)


def test_solutions_get_full_marks(solution_grades):
    failed = [(g.path, p.part, p.feedback) for g in solution_grades for p in g.parts if not p.passed]
    assert not failed, failed
    for g in solution_grades:
        assert g.status == "ok", (g.path, g.reason)
        assert [p.part for p in g.parts] == [n for n, _ in EXERCISES[g.exercise]]
        assert g.earned == g.points > 0
        assert g.isolation == (sandbox.ISOLATED if sandbox.available() else sandbox.UNISOLATED), (g.path, g.notes)
