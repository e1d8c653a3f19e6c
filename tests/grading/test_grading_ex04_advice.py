"""Exercise 04's advisory self-check, which the student release runs in the check cell (it ships no seeded faults):
it judges the cases against the predicate and the exercise's stated properties, and imports nothing grader-only."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from fastpath_lib.cases import CaseSpec  # noqa: E402
from fastpath_lib.grading.checks import ex04_advice as A  # noqa: E402
from tests.solved import solved  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_solutions_cases_meet_every_property():
    lines = A.advise_boundary_cases(solved("ex04")["my_boundary_cases"], show=False)
    assert all(a.ok for a in lines), [a for a in lines if not a.ok]


def test_a_thin_set_is_told_each_missing_property_by_condition_and_kind():
    lines = {a.what: a for a in A.advise_boundary_cases(lambda: [CaseSpec(8, 64), CaseSpec(7, 64)], show=False)}
    missing = {w for w, a in lines.items() if not a.ok}
    assert any("min_rows alone fails" in w for w in lines if lines[w].ok)
    for needed in ("cols alone fails", "row_stride alone fails", "dtype alone fails", "an eligible bfloat16 case",
                   "an eligible row_slice case", "without a weight", "exactly at the column limit"):
        assert any(needed in w for w in missing), needed


def test_a_case_on_which_two_conditions_fail_is_not_one_step_past_either():
    """fp64 and misaligned by 8 bytes together: neither the dtype nor the alignment is shown alone."""
    import torch

    lines = A.advise_boundary_cases(lambda: [CaseSpec(16, 64, torch.float64, weight=torch.float32, offset=1)],
                                    show=False)
    lines = {a.what: a for a in lines}
    assert not any(a.ok for w, a in lines.items() if "dtype alone" in w or "input_alignment alone" in w)


def test_its_conditions_are_the_seeded_predicate_faults_categories():
    """The advice names the same condition per category as the grader's predicate mutants (held by the autograder),
    so the advice covers what the grade is about, without importing it."""
    from fastpath_lib.grading.rules import mutants as M

    seeded: dict[str, set[str]] = {}
    for m in M.ALL:
        if m.kind == "predicate":
            seeded.setdefault(m.category, set()).add(m.condition)
    assert {c: set(v) for c, v in A.CONDITIONS.items()} == seeded


def test_the_student_release_runs_the_advice_in_exercise_04s_check_cell_and_it_imports_nothing_grader_only():
    from fastpath_lib import release

    lib = ROOT / "fastpath_lib"
    facade, held = release._facade(lib, (lib / "exercises.py").read_text(encoding="utf-8"))
    assert "check_boundary_cases" in facade and held is not None  # the façade takes it from the held-checks module
    assert ("from fastpath_lib.grading.checks.ex04_advice import advise_boundary_cases as check_boundary_cases"
            in held)
    source = (lib / "grading/checks/ex04_advice.py").read_text(encoding="utf-8")
    assert "grading/checks/ex04_advice.py" not in release.GRADER_ONLY
    assert not [f for f, _ in release._kit_imports(lib, source) if f in release.GRADER_ONLY]
