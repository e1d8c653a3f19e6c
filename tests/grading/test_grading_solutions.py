"""Full marks on solutions/, and their saved outputs true: every solution notebook graded as a learner's would be (its
kernel in the sandbox where it starts), every part passed, and the outputs that run printed compared with the saved
ones by nbval's own comparison (its markers, its output comparison, the kit's sanitizer ``nbval_sanitize.cfg``).

One execution serves both: the solutions are not collected by nbval as well (``pyproject.toml``'s ``testpaths``), so
each runs once. A check cell's saved output is compared with what the grader's run of that check gave (nbval would
have compared it with the check run in the notebook's kernel: the same check on the same functions). A file of its
own: the longest single job of the suite, it runs on one worker while test_grading.py's other notebook runs go on
another."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import pytest

nbformat = pytest.importorskip("nbformat")  # the notebook packages are absent on a bare GPU machine
nbval_plugin = pytest.importorskip("nbval.plugin")

from fastpath_lib.grading.engine import cli, sandbox  # noqa: E402
from fastpath_lib.grading.registry import EXERCISES, MIME  # noqa: E402
from tests.solved import grade_unchanged  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("ex[0-9][0-9]_*.ipynb"))
#: what nbval leaves out of a comparison (``IPyNbFile.__init__``'s list, images included: the kit runs without nbdime)
SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")


class _Comparison:
    """nbval's ``IPyNbCell.compare_outputs`` outside a pytest item: the kit's sanitizer and nbval's skip list."""

    colors = nbval_plugin.nocolors
    sanitize = nbval_plugin.IPyNbCell.sanitize
    compare_outputs = nbval_plugin.IPyNbCell.compare_outputs

    def __init__(self):
        text = (ROOT / "nbval_sanitize.cfg").read_text()
        self.parent = SimpleNamespace(skip_compare=SKIP_COMPARE,
                                      sanitize_patterns=OrderedDict(nbval_plugin.get_sanitize_patterns(text)))
        self.comparison_traceback = []

    def format_output_compare(self, key, left, right):
        self.comparison_traceback.append(f"{key}: saved {str(left)[:400]!r}\n    now {str(right)[:400]!r}")


def _markers(cell) -> dict:
    """nbval's options for a cell, from its tags and comment markers (``nbval-ignore-output``, ``NBVAL_SKIP``...)."""
    found = dict(nbval_plugin.find_metadata_tags(cell.get("metadata", {})))
    found.update(nbval_plugin.find_comment_markers(cell.source))
    return found


@pytest.fixture(scope="module")
def solution_runs():
    """Each solution's grade and the notebook as the grader's run left it (outputs of every code cell it ran)."""
    ran = {}
    original = cli._execute

    def keep(nb, *args, **kwargs):
        ran[len(ran)] = nb
        return original(nb, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "_execute", keep)
        grades = grade_unchanged(SOLUTIONS)
    assert len(ran) == len(SOLUTIONS), "each solution ran exactly once"
    return list(zip(grades, ran.values()))


def test_solutions_get_full_marks(solution_runs):
    grades = [g for g, _ in solution_runs]
    failed = [(g.path, p.part, p.feedback) for g in grades for p in g.parts if not p.passed]
    assert not failed, failed
    for g in grades:
        assert g.status == "ok", (g.path, g.reason)
        assert [p.part for p in g.parts] == [n for n, _ in EXERCISES[g.exercise]]
        assert g.earned == g.points > 0
        assert g.isolation == (sandbox.ISOLATED if sandbox.available() else sandbox.UNISOLATED), (g.path, g.notes)


def _mismatches(path: Path, grade, ran) -> list[str]:
    saved = nbformat.read(path, as_version=4)
    assert [c.get("id") for c in saved.cells] == [c.get("id") for c in ran.cells], path
    parts = {p.part: p for p in grade.parts}
    out = []
    for index, (old, new) in enumerate(zip(saved.cells, ran.cells)):
        if old.cell_type != "code":
            continue
        opts = _markers(old)
        if opts.get("skip") or opts.get("check") is False:
            continue
        if "grader-check" in old.get("metadata", {}).get("tags", []):  # its saved results are the grader's
            for shown in (o for o in old.outputs if MIME in o.get("data", {})):
                r = shown["data"][MIME]
                got = parts.get(r["part"])
                mine = got and {"passed": got.passed, "points": got.points, "feedback": got.feedback}
                if mine != {"passed": r["passed"], "points": r["points"], "feedback": r["feedback"]}:
                    out.append(f"{path.name} cell {index} ({r['part']}): saved {r} vs the grader's {mine}")
            continue
        compare = _Comparison()
        if not compare.compare_outputs(new.get("outputs", []), old.get("outputs", [])):
            out.append(f"{path.name} cell {index}:\n  " + "\n  ".join(map(str, compare.comparison_traceback)))
    return out


def test_saved_outputs_are_what_the_solutions_print_now(solution_runs):
    """nbval's check of solutions/, on the grader's run: each compared cell's saved outputs equal the fresh ones."""
    wrong = [m for path, (g, ran) in zip(SOLUTIONS, solution_runs) for m in _mismatches(path, g, ran)]
    assert not wrong, "\n".join(wrong)


def test_the_comparison_sees_a_changed_output(solution_runs):
    """The comparison above can fail: a saved output edited by one character, and a saved check result that claims a
    part the run did not pass, are both reported."""
    def compared_text(cell) -> bool:
        return (cell.cell_type == "code" and not _markers(cell) and "grader-check" not in cell.metadata.get("tags", [])
                and any("text" in o or "text/plain" in o.get("data", {}) for o in cell.outputs))

    path, plain, grade, ran = next((p, i, g, r) for p, (g, r) in zip(SOLUTIONS, solution_runs)
                                   for i, c in enumerate(nbformat.read(p, as_version=4).cells) if compared_text(c))
    cells = json.loads(json.dumps(ran.cells))
    edited = nbformat.from_dict({**ran, "cells": cells})
    out = edited.cells[plain].outputs[0]
    if "text" in out:
        out["text"] = out["text"] + "x"
    else:
        out["data"]["text/plain"] = out["data"]["text/plain"] + "x"
    assert any(f"cell {plain}" in m for m in _mismatches(path, grade, edited))
    failing = SimpleNamespace(parts=[SimpleNamespace(part=p.part, passed=False, points=p.points, feedback="no")
                                     for p in grade.parts])
    assert len(_mismatches(path, failing, ran)) == len(grade.parts)
