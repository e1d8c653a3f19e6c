"""The lessons' teachable items and where each is graded: the table in fastpath_lib.grading.rules.coverage, its copy in
docs/instructors.md, and the parts it names (issue 16: at least 32 of the ~35 items graded by a registered part)."""

import re
from pathlib import Path

from fastpath_lib import exercises
from fastpath_lib.grading.registry import EXERCISES
from fastpath_lib.grading.rules import coverage

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- seed-items:start -->", "<!-- seed-items:end -->"


def test_at_least_32_items_are_graded_by_a_registered_part():
    graded = coverage.graded()
    assert len(graded) >= coverage.MIN_GRADED >= 32, [i.name for i in coverage.ITEMS if i not in graded]
    assert len(coverage.ITEMS) >= 35


def test_every_named_part_is_registered():
    for item in coverage.ITEMS:
        for ex, part in item.parts:
            assert ex in EXERCISES, (item.name, ex)
            assert part in dict(EXERCISES[ex]), (item.name, ex, part)


def test_every_named_check_is_a_check_the_notebooks_call():
    for item in coverage.ITEMS:
        if item.parts:
            names = [n.strip() for n in item.check.split(",")]
            assert names and all(n.startswith("check_") and n in exercises.__all__ for n in names), item


def test_every_part_of_exercise_13_grades_an_item():
    named = {p for item in coverage.ITEMS for ex, p in item.parts if ex == "ex13"}
    assert named == set(dict(EXERCISES["ex13"])), set(dict(EXERCISES["ex13"])) ^ named


def test_items_are_unique_and_name_their_lessons():
    names = [i.name for i in coverage.ITEMS]
    assert len(names) == len(set(names))
    assert all(i.lessons and all(re.fullmatch(r"0[0-7]", n) for n in i.lessons) for i in coverage.ITEMS)


def test_the_instructors_table_is_the_rendered_table():
    page = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    assert START in page and END in page, (
        f"docs/instructors.md has no {START} ... {END} block: paste coverage.markdown_table() between the markers")
    copy = page.split(START, 1)[1].split(END, 1)[0].strip()
    assert copy == coverage.markdown_table().strip(), (
        "docs/instructors.md's item table is stale: paste coverage.markdown_table()")


def test_the_rendered_table_counts_what_it_lists():
    table = coverage.markdown_table()
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| item")]
    assert len(rows) == len(coverage.ITEMS)
    assert f"{len(coverage.graded())} of {len(coverage.ITEMS)} items graded." in table
    assert sum("| — |" in r for r in rows) == len(coverage.ITEMS) - len(coverage.graded())
