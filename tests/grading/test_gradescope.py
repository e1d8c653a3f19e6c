"""``grade --format gradescope``'s document: Gradescope's ``results.json``, built from the grader's own result objects.

No notebook runs here: the :class:`NotebookGrade` objects are built as the grader builds them (every registered part
of every exercise, and the statuses a notebook can end in), so these tests take well under a second.
"""

from __future__ import annotations

import copy
import json

import pytest

from fastpath_lib.grading.engine.cli import NotebookGrade, PartGrade
from fastpath_lib.grading.registry import EXERCISES
from fastpath_lib.grading.report import gradescope as gs


def _grade(ex: str, status: str = "ok", reason: str = "", passed=lambda i: True) -> NotebookGrade:
    parts = [PartGrade(ex, name, pts, pts if passed(i) else 0, passed(i),
                       "passed" if passed(i) else f"yours vs expected for {name}")
             for i, (name, pts) in enumerate(EXERCISES[ex])]
    return NotebookGrade(f"exercises/{ex}_x.ipynb", ex, status, reason, 3.25, parts)


def _grades() -> list[NotebookGrade]:
    """Every exercise once: full marks, partial marks, a tampered notebook, a timeout, and a non-exercise."""
    out = []
    for k, ex in enumerate(sorted(EXERCISES)):
        if k % 4 == 1:
            out.append(_grade(ex, "errors", "cell 3 raised NameError: x", passed=lambda i: i % 2 == 0))
        elif k % 4 == 2:
            g = _grade(ex, "tampered", "registered an IPython event hook", passed=lambda i: False)
            for p in g.parts:
                p.feedback = "tampered: registered an IPython event hook"
            out.append(g)
        elif k % 4 == 3:
            out.append(_grade(ex, "timeout", "cell 5 ran past the notebook's 300 s limit", passed=lambda i: i == 0))
        else:
            out.append(_grade(ex))
    out.append(NotebookGrade("notes.ipynb", None, "unknown exercise", "not an exercise notebook", 0.0, []))
    return out


def test_results_validate_against_the_schema_and_gradescopes_rules():
    doc = gs.results_json(_grades(), visibility="after_due_date", stdout_visibility="hidden")
    assert gs.validate(doc) == []
    json.loads(json.dumps(doc))  # plain JSON: no tuples, paths or NaN sneak in
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft7Validator.check_schema(gs.SCHEMA)
    jsonschema.validate(doc, gs.SCHEMA)


def test_every_part_is_one_test_with_its_points_and_the_scores_add_up():
    grades = _grades()
    doc = gs.results_json(grades)
    graded = [t for t in doc["tests"] if "score" in t]
    expected = {(p.exercise, p.part): p for g in grades for p in g.parts}
    assert len(graded) == len(expected) == sum(len(v) for v in EXERCISES.values())
    for t in graded:
        ex, part = t["name"].split(" ", 1)
        p = expected[(ex, part)]
        assert (t["score"], t["max_score"], t["status"]) == (p.earned, p.points, "passed" if p.passed else "failed")
        assert p.feedback in t["output"]
    assert len({t["number"] for t in graded}) == len(graded)  # Gradescope orders and labels tests by number
    assert doc["score"] == sum(g.earned for g in grades) == sum(t["score"] for t in graded)
    assert 0 < doc["score"] < doc["extra_data"]["max_score"] == sum(g.points for g in grades)
    assert doc["execution_time"] >= sum(g.seconds for g in grades)
    assert "visibility" not in doc and "stdout_visibility" not in doc


def test_a_notebooks_status_is_said_in_words_not_only_as_zeros():
    grades = _grades()
    doc = gs.results_json(grades)
    tampered = next(g for g in grades if g.status == "tampered")
    for g in grades:
        assert f"{g.earned}/{g.points}" in doc["output"] and g.status in doc["output"]
    for t in doc["tests"]:
        if t["name"].startswith(tampered.exercise + " "):
            assert "tampered" in t["output"] and t["score"] == 0 and t["status"] == "failed"
    timeout = next(g for g in grades if g.status == "timeout")
    outs = [t["output"] for t in doc["tests"] if t["name"].startswith(timeout.exercise + " ")]
    assert all(timeout.reason in o for o in outs)
    # a notebook with no parts to grade is an informational failed test, worth nothing
    (info,) = [t for t in doc["tests"] if "score" not in t]
    assert info["status"] == "failed" and "not an exercise" in info["output"]


def test_visibility_reaches_every_test_and_is_checked():
    doc = gs.results_json(_grades(), visibility="after_published")
    assert doc["visibility"] == "after_published" and {t["visibility"] for t in doc["tests"]} == {"after_published"}
    with pytest.raises(ValueError, match="after_due_date"):
        gs.results_json(_grades(), visibility="later")
    with pytest.raises(ValueError, match="stdout_visibility"):
        gs.results_json(_grades(), stdout_visibility="students")


def test_no_notebooks_is_still_a_valid_zero():
    doc = gs.results_json([])
    assert doc["score"] == 0 and doc["tests"] == [] and gs.validate(doc) == []


BROKEN = {  # what a broken mapping could write -> the words the validator says
    "score as text": (lambda d: d.update(score="7"), "expected number"),
    "a boolean score": (lambda d: d["tests"][0].update(score=True), "expected number"),
    "misspelt max_score": (lambda d: d["tests"][0].update(max_points=d["tests"][0].pop("max_score")),
                           "unknown field 'max_points'"),
    "status word": (lambda d: d["tests"][0].update(status="ok"), "is not one of"),
    "visibility word": (lambda d: d.update(visibility="students"), "is not one of"),
    "more than the maximum": (lambda d: d["tests"][0].update(score=d["tests"][0]["max_score"] + 1), "above max_score"),
    "score without maximum": (lambda d: d["tests"][0].pop("max_score"), "without a max_score"),
    "tests not a list": (lambda d: d.update(tests={"ex01": 1}), "expected array"),
    "nothing scored": (lambda d: (d.pop("score"), d["tests"].append({"name": "x", "status": "passed"})),
                       "no top-level score"),
    "neither score nor tests": (lambda d: (d.pop("score"), d.pop("tests")), "none of the alternatives"),
    "negative time": (lambda d: d.update(execution_time=-1), "below the minimum"),
    "NaN score": (lambda d: d.update(score=float("nan")), "expected number"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_the_validator_refuses_a_broken_document(name):
    breaks, words = BROKEN[name]
    doc = copy.deepcopy(gs.results_json(_grades()[:2]))
    breaks(doc)
    errors = gs.validate(doc)
    assert errors and any(words in e for e in errors), errors


@pytest.mark.parametrize("name", [n for n in BROKEN if n not in ("more than the maximum", "score without maximum",
                                                                  "nothing scored", "NaN score")])
def test_jsonschema_agrees_on_the_schema_level_breaks(name):
    """The plain-Python check and a real JSON Schema validator reject the same documents (where it is installed)."""
    jsonschema = pytest.importorskip("jsonschema")
    doc = copy.deepcopy(gs.results_json(_grades()[:2]))
    BROKEN[name][0](doc)
    assert not jsonschema.Draft7Validator(gs.SCHEMA).is_valid(doc)


def test_write_validates_and_writes_json(tmp_path, monkeypatch):
    out = tmp_path / "results" / "results.json"
    doc = gs.write(_grades(), out)
    assert json.loads(out.read_text()) == doc
    # a mapping that produced a non-conforming document is refused before anything is written
    bad = tmp_path / "bad.json"
    monkeypatch.setattr(gs, "results_json", lambda grades, **kw: {"score": "all of it"})
    with pytest.raises(ValueError, match="expected number"):
        gs.write(_grades(), bad)
    assert not bad.exists()


def test_copies_of_one_exercise_in_a_submission_count_once(tmp_path, monkeypatch):
    """Issue 41: three copies of an honest 1/3 exercise 01 notebook in one Gradescope submission pinned to ex01 scored
    3/3. One copy is graded (the one named as handed out, chosen before grading) and the others are listed at 0/0,
    naming it."""
    from fastpath_lib.grading.engine import autograde, cli, submission

    sub, res = tmp_path / "submission", tmp_path / "results"
    nb = {"cells": [], "metadata": {"fastpath": {"exercise": "ex01"}}, "nbformat": 4, "nbformat_minor": 5}
    handed_out = submission.handed_out_name("ex01")
    names = ["a/ex01_copy.ipynb", "b/ex01_copy (2).ipynb", f"z/{handed_out}"]
    for name in names:
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_text(json.dumps(nb), encoding="utf-8")
    graded = []

    def one_of_three(path, **kw):  # an honest notebook that earns 1 of ex01's 3 points, whichever copy
        graded.append(path.name)
        return NotebookGrade(str(path), "ex01", "ok", "", 1.0, [PartGrade("ex01", part, pts, pts * (i == 0), i == 0,
                                                                          "") for i, (part, pts) in
                                                                 enumerate(EXERCISES["ex01"])])

    monkeypatch.setattr(cli, "grade_notebook", one_of_three)
    assert autograde.main(["gradescope", "--submission", str(sub), "--results", str(res), "--exercises", "ex01",
                           "--isolation", "none"]) == 0
    doc = json.loads((res / "results.json").read_text())
    assert graded == [handed_out], graded  # the others were never run
    assert doc["score"] == EXERCISES["ex01"][0][1]  # one copy's first part, once
    assert doc["extra_data"]["max_score"] == sum(p for _, p in EXERCISES["ex01"])
    dup = [n for n in doc["extra_data"]["notebooks"] if n["status"] == cli.DUPLICATE]
    assert len(dup) == 2 and all(f"z/{handed_out}" in n["reason"] and "as handed out" in n["reason"] for n in dup)
    assert gs.validate(doc) == []
