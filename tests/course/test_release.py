"""The course release (``python -m fastpath_lib release``): a student folder without solutions or answer keys, and an
autograder that grades from its own copy of the check cells, with no ``solutions/``."""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import tomllib

from fastpath_lib import release as R
from fastpath_lib.grading.registry import EXERCISES
from fastpath_lib.runtime import ROOT

PY = sys.executable


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    folder = tmp_path_factory.mktemp("release")
    R.release(folder)
    return folder


def _texts(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            yield path, path.read_text(encoding="utf-8", errors="replace")


def _joined(texts) -> str:
    """``texts`` as one string to search, each apart from the next by a NUL, which no line searched for holds (text
    files hold none): a line is in the joined string exactly when it is in one of ``texts``."""
    return "\0".join(texts)


def _distinct(lines, public_texts, width):
    """The stripped lines (at least ``width`` characters, no comments) found in none of ``public_texts``."""
    lines = {x.strip() for x in lines if len(x.strip()) >= width and not x.strip().startswith(("#", '"""'))}
    assert not [x for x in lines if "\0" in x]
    public = _joined(public_texts)
    return {x for x in lines if not (x in public or x.replace('"', '\\"') in public)}


def _found(lines, folder: Path) -> list[tuple[str, str]]:
    """``(file, line)`` for each of ``lines`` in a file of ``folder`` (searched as one string first: most find none)."""
    texts = list(_texts(folder))
    every = _joined(t for _, t in texts)
    lines = [x for x in lines if x in every]
    return [(p.relative_to(folder).as_posix(), x) for p, t in texts for x in lines if x in t]


@functools.cache
def _public_texts():
    """What every learner has, course or not: exercises, lessons, the library outside grading, the materials."""
    folders = [ROOT / "exercises", ROOT / "notebooks", ROOT / "upstream"]
    folders += [p for p in (ROOT / "fastpath_lib").iterdir() if p.name != "grading"]
    files = [p for f in folders for p in ([f] if f.is_file() else f.rglob("*"))  # every text file, a .patch too
             if p.is_file() and b"\0" not in p.read_bytes()]
    files += [ROOT / "fastpath_lib/grading" / n for n in ("materials.py", "vocabulary.py", "given.py")]
    return tuple(p.read_text(encoding="utf-8") for p in files)


def test_the_student_folder_holds_what_a_learner_runs_and_no_solution(out):
    student = out / "student"
    for rel in ("notebooks/00_setup.ipynb", "exercises/ex01_reference.ipynb", "fastpath_lib/exercises.py", "kit",
                "pyproject.toml", "constraints.txt", "environment.yml", "README.md", "data/NOTICE.md"):
        assert (student / rel).is_file(), rel
    assert not (student / "solutions").exists() and not (student / "tests").exists()
    # what pyproject.toml installs beside the package (its py-modules): `pip install -e .` needs each of them
    modules = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"].get("py-modules", [])
    assert modules, "pyproject.toml names no top-level module: this check has nothing to check"
    for folder in (student, out / "autograder"):
        assert [m for m in modules if not (folder / f"{m}.py").is_file()] == [], folder.name
    assert not list(student.rglob("*.pyc")) and not list(student.rglob("*.zip"))
    # every distinctive line of the solutions' FILL ME IN regions (grepped here, independently of the release's own
    # check): none is anywhere in the student folder
    solved = []
    for path in sorted((ROOT / "solutions").glob("ex*.py")):
        text = path.read_text(encoding="utf-8")
        solved += [x for block in re.findall(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", text, re.S)
                   for x in block.splitlines()]
    lines = _distinct(solved, _public_texts(), 24)
    assert len(lines) > 150  # the grep has something to find
    found = _found(lines, student)
    assert not found, found[:5]


def test_the_student_folder_holds_no_answer_key_or_hidden_check(out):
    student, lib = out / "student" / "fastpath_lib", ROOT / "fastpath_lib"
    kept = [p.read_text(encoding="utf-8") for p in student.rglob("*.py") if p.relative_to(student).as_posix()
            not in R.GRADER_ONLY]
    public = [*_public_texts(), *kept]
    for rel in R.GRADER_ONLY:
        if (student / rel).exists():  # a stub: a docstring and plain constants, nothing else
            tree = ast.parse((student / rel).read_text(encoding="utf-8"))
            assert all(isinstance(n, ast.Assign) and ast.literal_eval(n.value) is not None for n in tree.body[1:]), rel
        # no distinctive line of a grader-only file (mutants, broken ops, answer keys, scenario keys) is in the folder
        lines = _distinct((lib / rel).read_text(encoding="utf-8").splitlines(), public, 30)
        found = _found(lines, out / "student")
        assert not found, (rel, found[:3])
    for rel in ("grading/rules/mutants.py", "grading/rules/mutant_kernels.py", "grading/checks/ex09_contract.py",
                "grading/checks/ex11_commits.py", "grading/rules/fused_mutants.py", "grading/rules/ex13_scenarios.py"):
        assert (lib / rel).exists() and rel in R.GRADER_ONLY, rel  # the faults, broken ops and keys stay held


def test_student_checks_run_as_advice_and_held_ones_say_where_they_run(out):
    code = """
import pkgutil, importlib, fastpath_lib
from fastpath_lib import exercises as ex
assert fastpath_lib.__file__.startswith(%r), fastpath_lib.__file__
for m in pkgutil.walk_packages(fastpath_lib.__path__, "fastpath_lib."):
    importlib.import_module(m.name)
print([r.passed for r in ex.check_default_eps(lambda dtype: 1e-6, show=False)])
ex.check_boundary_cases([])
print(ex.check_commit_plan(None, show=False))
""" % str(out / "student")
    env = dict(os.environ, PYTHONPATH=str(out / "student"), TRITON_INTERPRET="1")
    res = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=out)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.splitlines()[0] == "[False]"
    assert "ex04" in res.stdout and "runs in your course's autograder only" in res.stdout
    assert res.stdout.splitlines()[-1] == "[]"


def test_the_autograder_zip_holds_gradescopes_scripts_and_the_grader(out):
    with zipfile.ZipFile(out / "autograder.zip") as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert {"setup.sh", "run_autograder", "grade", "check-cells/ex01_reference.ipynb",
            "fastpath_lib/grading/checks/ex04_boundary.py", "fastpath_lib/grading/report/gradescope.py"} <= names
    assert all(modes[n] & 0o100 for n in ("setup.sh", "run_autograder", "grade"))
    assert not any(n.startswith("solutions/") for n in names)


def _blank_checks(src: Path, dst: Path, replace=None) -> None:
    """``src`` with each check cell's source replaced (by ``replace(cell)``, else by ``pass``)."""
    nb = nbformat.read(src, as_version=4)
    for cell in nb.cells:
        if "grader-check" in cell.get("metadata", {}).get("tags", []):
            cell.source = replace(cell) if replace else "pass"
    dst.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dst)


@pytest.fixture(scope="module")
def autograded(out, tmp_path_factory):
    """An honest exercise 01 (the solution, its check cells emptied) and the results of the autograder's
    ``run_autograder`` for it."""
    tmp = tmp_path_factory.mktemp("autograded")
    env = dict(os.environ, AUTOGRADER_ROOT=str(tmp), FASTPATH_PYTHON=PY, FASTPATH_ISOLATION="none")
    _blank_checks(ROOT / "solutions/ex01_reference.ipynb", tmp / "submission/ex01_reference.ipynb")
    res = subprocess.run([str(out / "autograder" / "run_autograder")], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return tmp / "submission/ex01_reference.ipynb", json.loads((tmp / "results/results.json").read_text())


def test_run_autograder_restores_the_check_cells_from_its_own_copy(out, autograded, tmp_path):
    ag = out / "autograder"
    assert not (ag / "solutions").exists()
    env = dict(os.environ, AUTOGRADER_ROOT=str(tmp_path), FASTPATH_PYTHON=PY, FASTPATH_ISOLATION="none")
    # the solution with its check cells emptied grades as the solution does: full marks
    doc = autograded[1]
    assert (doc["score"], doc["extra_data"]["max_score"]) == (3, 3), doc["output"]
    assert "restored" in doc["output"] and "no solutions/" not in doc["output"]

    # nbgrader's layout: the untouched exercise scores zero, and so does one whose check cells hand the check the
    # right answer inline (the grader calls its own copy of the cell, on the learner's stub)
    submitted = tmp_path / "submitted"
    (submitted / "bob/ex01").mkdir(parents=True)
    (submitted / "bob/ex01/ex01_reference.ipynb").write_bytes((ROOT / "exercises/ex01_reference.ipynb").read_bytes())
    _blank_checks(ROOT / "exercises/ex01_reference.ipynb", submitted / "carol/ex01/ex01_reference.ipynb",
                  lambda c: c.source.replace("my_default_eps", "(lambda dtype: torch.finfo(dtype).eps)"))
    res = subprocess.run([str(ag / "grade"), "autograde", "nbgrader", str(submitted), "--isolation", "none"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [r.split(",") for r in (tmp_path / "autograded/grades.csv").read_text().splitlines()[1:]]
    assert [r[:6] for r in rows] == [[who, "ex01", "ex01_reference.ipynb", "ex01", "0", "3"]
                                     for who in ("bob", "carol")]
    carol = json.loads((tmp_path / "autograded/carol/ex01/results.json").read_text())
    assert any("edited: restored" in n for n in carol["notebooks"][0]["notes"])


def test_a_release_never_overwrites_what_it_did_not_write(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(R.ReleaseError, match="holds other files"):
        R.release(tmp_path)
    with pytest.raises(R.ReleaseError, match="part of the checkout"):
        R.release(ROOT / "exercises" / "out")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_autograders_scripts_parse(out):
    for name in ("setup.sh", "run_autograder", "grade"):
        res = subprocess.run(["bash", "-n", str(out / "autograder" / name)], capture_output=True, text=True)
        assert res.returncode == 0, (name, res.stderr)


def test_an_empty_submission_still_gets_results_that_say_why(tmp_path):
    from fastpath_lib.grading.engine import autograde
    from fastpath_lib.grading.report import gradescope

    (tmp_path / "submission").mkdir()
    (tmp_path / "student").mkdir()
    assert autograde.main(["gradescope", "--submission", str(tmp_path / "submission"),
                           "--results", str(tmp_path / "results")]) == 0
    doc = json.loads((tmp_path / "results/results.json").read_text())
    assert doc["score"] == 0 and "No notebook" in doc["output"] and gradescope.validate(doc) == []
    assert autograde.main(["prairielearn", "--job", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results/results.json").read_text())
    assert doc["gradable"] is False and doc["score"] == 0.0
    assert autograde.main(["nbgrader", str(tmp_path / "nowhere")]) == 2


def test_prairielearn_results_carry_points_and_a_fraction():
    from fastpath_lib.grading.engine.autograde import prairielearn_json
    from fastpath_lib.grading.engine.cli import NotebookGrade, PartGrade

    g = NotebookGrade("ex01_reference.ipynb", "ex01", "ok", "", 1.0,
                      [PartGrade("ex01", "default_eps", 1, 1, True, ""), PartGrade("ex01", "reference", 2, 0, False,
                                                                                   "yours vs expected")])
    doc = prairielearn_json([g])
    assert doc["gradable"] and doc["score"] == pytest.approx(1 / 3)
    assert [(t["name"], t["points"], t["max_points"]) for t in doc["tests"]] == [("ex01 default_eps", 1, 1),
                                                                                 ("ex01 reference", 0, 2)]
    assert doc["tests"][1]["message"] == "yours vs expected"


def test_a_per_exercise_zip_pins_its_assignment(out, tmp_path):
    with zipfile.ZipFile(out / "gradescope" / "ex01.zip") as zf:
        assert zf.read("assignment.txt").decode().strip() == "ex01" and "run_autograder" in zf.namelist()
    assert len(list((out / "gradescope").glob("ex*.zip"))) == len(list((ROOT / "exercises").glob("ex*.ipynb")))
    # an assignment's missing exercise is listed part by part at zero, so the maximum is the assignment's
    (tmp_path / "submission").mkdir()
    env = dict(os.environ, AUTOGRADER_ROOT=str(tmp_path), FASTPATH_PYTHON=PY, FASTPATH_EXERCISES="ex01")
    res = subprocess.run([str(out / "autograder" / "run_autograder")], env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((tmp_path / "results/results.json").read_text())
    assert (doc["score"], doc["extra_data"]["max_score"]) == (0, 3)
    assert [t["name"] for t in doc["tests"]] == ["ex01 default_eps", "ex01 reference"]
    assert "no notebook of ex01" in doc["tests"][0]["output"]


def test_a_notebook_of_another_exercise_is_reported_not_counted():
    from fastpath_lib.grading.engine.autograde import assigned
    from fastpath_lib.grading.engine.cli import NotebookGrade, PartGrade

    g = NotebookGrade("ex03_predicate.ipynb", "ex03", "ok", "", 1.0, [PartGrade("ex03", "predicate", 1, 1, True, "")])
    out = assigned([g], ("ex01",))
    assert [(x.exercise, x.status, x.points, x.earned) for x in out] == [("ex03", "not this assignment's", 0, 0),
                                                                       ("ex01", "missing", 3, 0)]
    assert assigned([g], ()) == [g]


def test_the_student_folder_grades_honest_answers_as_the_autograder_does(out, autograded, tmp_path):
    """Issue 41: in student/, the grader gave honest answers 8/32 where the autograder gave 32/32 (a circular import
    in every notebook's first cell under the sandbox; exercise 04 "the sandbox could not start"). The honest notebook
    the autograder graded (:func:`autograded`) is graded again by the student folder's grader, in the sandbox where
    it starts here: every part scores as in the autograder, its check cells restored from the student's own
    ``check-cells/``; exercise 04, whose checks the student folder does not hold, is not run, and its parts say the
    autograder grades them, outside the student's score. One kernel, about 20 s."""
    from fastpath_lib.grading.engine import sandbox
    from fastpath_lib.grading.report.table import HELD

    notebook, doc = autograded
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / notebook.name).write_bytes(notebook.read_bytes())
    (answers / "ex04_boundary_cases.ipynb").write_bytes((ROOT / "solutions/ex04_boundary_cases.ipynb").read_bytes())
    isolation = "bwrap" if sandbox.problem() is None else "none"
    env = dict(os.environ, PYTHONPATH=str(out / "student"), TRITON_INTERPRET="1")
    res = subprocess.run([PY, "-m", "fastpath_lib", "grade", "--format", "json", "--isolation", isolation,
                          str(answers)], env=env, capture_output=True, text=True, timeout=600, cwd=out / "student")
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
    mine = {n["exercise"]: n for n in json.loads(res.stdout)["notebooks"]}
    theirs = {t["name"]: (t["score"], t["max_score"]) for t in doc["tests"]}
    assert {f"ex01 {p['part']}": (p["earned"], p["points"]) for p in mine["ex01"]["parts"]} == theirs
    assert mine["ex01"]["status"] == "ok" and any("restored" in n for n in mine["ex01"]["notes"]), mine["ex01"]
    held = mine["ex04"]
    assert held["status"] == HELD and [p["part"] for p in held["parts"]] == [p for p, _ in EXERCISES["ex04"]]
    assert all(p["points"] == 0 and p["feedback"].startswith(HELD) for p in held["parts"]), held


def test_the_student_folder_tells_of_what_it_holds(out):
    """Issue 41: the student folder told learners "the solved versions are in `solutions/`", listed `./kit test`
    with no tests shipped, and installed vLLM "for the provider tests". Its README and exercises name no folder it
    lacks and no command its ./kit does not run; its ./kit's help is the student folder's own."""
    from fastpath_lib.release_text import kit_folders

    student = out / "student"
    absent = {name for name in kit_folders(ROOT) if not (student / name).exists()}
    assert {"solutions", "tests", "tools"} <= absent
    offered = R.offered_commands(student / "kit")
    assert {"lab", "grade"} <= offered and not offered & {"test", "lessons", "release", "gpu-versions"}, offered
    assert "test" in R.offered_commands(ROOT / "kit")
    readme = (student / "README.md").read_text(encoding="utf-8")
    texts = {"README.md": readme.split("\n---\n", 1)[1]} | {
        p.name: "\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "markdown")
        for p in sorted((student / "exercises").glob("ex*.ipynb"))}
    for name, text in texts.items():
        assert not re.findall(r"`(?:%s)/" % "|".join(absent), text), name
        assert set(re.findall(r"(?:^|`)\./kit ([a-z][\w-]*)", text, re.M)) <= offered, name
    # the preface names the kit's folders the release leaves out, not what running the kit made (reader 18 F3-1)
    named = set(re.findall(r"`([\w.-]+)/`", readme.split("\n---\n")[0].split("it has no", 1)[1].split(". Each", 1)[0]))
    assert "./kit lab" in readme and named == absent, (named, absent)
    assert "the solved" in (ROOT / "exercises/ex01_reference.ipynb").read_text()  # the kit's own keeps it
    # check-cells/ is the exercises as released (reader 16b F18), so it names nothing the folder lacks either
    for p in sorted((student / "exercises").glob("ex*.ipynb")):
        assert (student / R.CHECK_CELLS / p.name).read_bytes() == p.read_bytes(), p.name


def test_each_released_exercise_says_which_of_its_checks_the_autograder_holds(out):
    """Reader 16b F1: an exercise whose check the release holds says so where it tells what its check prints; the
    exercise 04 stand-in gives advice, no points; an exercise whose checks all ship says nothing of it."""
    from fastpath_lib.grading.registry import CHECKS
    from fastpath_lib.release_text import HOW

    held = {n for n, mod in CHECKS.items() if f"grading/{mod.replace('.', '/')}.py" in R.GRADER_ONLY}
    told = {}
    for p in sorted((out / "student/exercises").glob("ex*.ipynb")):
        nb = nbformat.read(p, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        (how,) = [c.source.split(HOW, 1)[1].split("\n\n")[0] for c in nb.cells
                  if c.cell_type == "markdown" and HOW in c.source]
        calls = {n for n in held if f"ex.{n}(" in code}
        assert all(f"`ex.{n}`" in how for n in calls) and ("In this release" in how) == bool(calls), (p.name, how)
        told[p.name[:4]] = how
    assert "gives advice, no points" in told["ex04"] and "autograder only" in told["ex13"]
    assert "In this release" not in told["ex01"] and "gives advice" not in told["ex09"]
    assert "`ex.check_boundary_cases` gives advice in its cell, no points" in " ".join(
        (out / "student/README.md").read_text(encoding="utf-8").split())


def test_a_part_is_held_when_no_check_here_names_it(monkeypatch):
    """In-process: with exercise 08's evidence check left out (as a student release leaves it), only its part is
    held; the other checks of exercise 08 name theirs. With every module here, nothing is held."""
    from fastpath_lib.grading.engine import submission

    assert all(submission.held_parts(ex) == () for ex in EXERCISES)
    shipped = submission.shipped
    monkeypatch.setattr(submission, "shipped", lambda m: m != "checks.ex08_evidence" and shipped(m))
    assert submission.held_parts("ex08") == ("evidence_package",)
    monkeypatch.setattr(submission, "shipped", lambda m: not m.startswith("checks.ex08") and shipped(m))
    assert submission.held_parts("ex08") == tuple(part for part, _ in EXERCISES["ex08"])
