"""``python -m fastpath_lib autograde LAYOUT ...``: the grader over the folders that course platforms hand it.

The same grader as ``python -m fastpath_lib grade`` (:func:`fastpath_lib.grading.engine.cli.grade_notebook`: each
notebook executed on a copy, its check cells restored from the grader's own copy, the verdict computed in the grader's
process), for three layouts; in CI, ``grade FOLDER`` (or a release's ``./grade FOLDER``) is the plain form.

* ``gradescope [--submission DIR] [--results DIR]`` (defaults ``/autograder/submission`` and
  ``/autograder/results``): every notebook under the submission folder, a zip's folders included, into
  ``results.json`` in Gradescope's format (:mod:`fastpath_lib.grading.report.gradescope`). A release's
  ``run_autograder`` runs this.
* ``prairielearn [--job DIR]`` (default ``/grade``): the notebooks under ``JOB/student``, into
  ``JOB/results/results.json`` in PrairieLearn's external-grader format: ``gradable``, ``score`` (a fraction of the
  points), ``message``, ``output`` and ``tests`` (``name``, ``description``, ``points``, ``max_points``,
  ``message``). A submission without a notebook is not gradable.
* ``nbgrader SUBMITTED [--out DIR]``: nbgrader's ``submitted/<student>/<assignment>/*.ipynb``; writes
  ``DIR/grades.csv`` (one row per notebook: student, assignment, notebook, exercise, score, max_score, status) and
  ``DIR/<student>/<assignment>/results.json`` (each notebook's parts and feedback). ``DIR`` defaults to
  ``autograded/`` beside ``SUBMITTED``, as nbgrader names its folder.

A submission counts one notebook per exercise: where it holds several of one exercise, the copy named as the
exercise hands it out (else the first by path) is graded, and each other copy is listed, not counted, naming the
copy graded (:func:`fastpath_lib.grading.engine.cli.grade_notebooks`; ``grade`` counts the same way).

``--exercises ex01,ex02`` (Gradescope and PrairieLearn; a release's per-exercise zips set it through their
``assignment.txt``) pins what the assignment is: a notebook of another exercise is reported and not counted, and an
assigned exercise without a notebook is listed part by part at zero, so the maximum score is always the assignment's.

Results are written even when grading fails as a whole (the results say why), so a platform never shows an empty
grade without a reason. The learner's kernel runs in the sandbox or not at all (``--isolation bwrap``, the default
here): where the sandbox cannot start, every notebook is "not graded" and the results say why
(docs/grading-sandbox.md). Exit status: 0 when the results were written, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import traceback
from pathlib import Path

__all__ = ["notebooks_in", "assigned", "prairielearn_json", "main"]


def notebooks_in(folder: Path) -> list[Path]:
    """The ``.ipynb`` files under ``folder`` (any depth; Jupyter's checkpoints and hidden folders left out)."""
    return sorted(p for p in Path(folder).rglob("*.ipynb") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def _grade(paths, args):
    from fastpath_lib import runtime
    from fastpath_lib.grading.engine.cli import grade_notebooks

    runtime.use_interpreter()  # as grade does: without CUDA the grader's own launches run in Triton's interpreter
    # one grade per exercise: a second copy of an exercise in one submission is listed, not counted
    return grade_notebooks(paths, timeout=args.timeout, kernel_name=args.kernel, isolation=args.isolation)


def _exercises(text: str | None) -> tuple[str, ...]:
    """``"ex01, ex02"`` -> ``("ex01", "ex02")`` (``ValueError`` naming an unknown exercise)."""
    from fastpath_lib.grading.registry import EXERCISES

    names = tuple(dict.fromkeys(x.strip() for x in (text or "").replace(",", " ").split() if x.strip()))
    unknown = [x for x in names if x not in EXERCISES]
    if unknown:
        raise ValueError(f"no exercise {', '.join(unknown)} (the kit's: {', '.join(EXERCISES)})")
    return names


def assigned(grades, exercises) -> list:
    """The grades as the assignment counts them: a notebook of an exercise not in ``exercises`` becomes an uncounted
    entry that says so, and an exercise without a notebook is listed with each part at zero (every grade as it is
    when ``exercises`` is empty)."""
    from fastpath_lib.grading.engine.cli import NotebookGrade, PartGrade
    from fastpath_lib.grading.registry import EXERCISES

    if not exercises:
        return list(grades)
    out = []
    for g in grades:
        if g.exercise in exercises:
            out.append(g)
        else:
            what = f"exercise {g.exercise}" if g.exercise else "not an exercise notebook"
            out.append(NotebookGrade(g.path, g.exercise, "not this assignment's",
                                     f"{what}; this assignment grades {', '.join(exercises)}", g.seconds, [], g.notes,
                                     g.isolation))
    seen = {g.exercise for g in grades}
    for ex in exercises:
        if ex not in seen:
            why = f"no notebook of {ex} in the submission"
            out.append(NotebookGrade(f"({ex} missing)", ex, "missing", why, 0.0,
                                     [PartGrade(ex, part, pts, 0, False, why) for part, pts in EXERCISES[ex]]))
    return out


def _summary(grades) -> str:
    lines = []
    for g in grades:
        line = f"{Path(g.path).name}: {g.earned}/{g.points} ({g.status}" + (f": {g.reason}" if g.reason else "") + ")"
        lines.append(line + "".join(f"\n  note: {n}" for n in g.notes))
    return "\n".join(lines)


def _gradescope(args) -> int:
    from fastpath_lib.grading.report import gradescope

    submission, results = Path(args.submission), Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    out = results / "results.json"
    paths = notebooks_in(submission) if submission.is_dir() else []
    if not paths and not args.exercises:
        doc = {"score": 0, "output": f"No notebook (.ipynb) in the submission ({submission}): upload your exercise "
                                     "notebook."}
        out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        print(doc["output"], file=sys.stderr)
        return 0
    try:
        grades = assigned(_grade(paths, args), args.exercises)
        gradescope.write(grades, out)
    except Exception as exc:  # noqa: BLE001 - the platform must get a results.json that says what happened
        traceback.print_exc()
        doc = {"score": 0, "output": f"The autograder failed ({type(exc).__name__}: {exc}); tell your instructor."}
        out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        return 0
    print(_summary(grades))
    return 0


def prairielearn_json(grades) -> dict:
    """PrairieLearn's external-grader ``results.json`` for the grader's results (``score`` in 0..1)."""
    from fastpath_lib.grading.registry import TITLES

    earned, points = sum(g.earned for g in grades), sum(g.points for g in grades)
    tests = [{"name": f"{p.exercise} {p.part}", "description": TITLES.get(p.exercise, ""), "points": p.earned,
              "max_points": p.points, "message": p.feedback} for g in grades for p in g.parts]
    return {"gradable": bool(points), "score": earned / points if points else 0.0,
            "message": f"{earned}/{points} points" if points else "no exercise notebook found in the submission",
            "output": _summary(grades), "tests": tests}


def _prairielearn(args) -> int:
    job = Path(args.job)
    results = job / "results"
    results.mkdir(parents=True, exist_ok=True)
    paths = notebooks_in(job / "student") if (job / "student").is_dir() else []
    try:
        doc = prairielearn_json(assigned(_grade(paths, args), args.exercises))
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        doc = {"gradable": False, "score": 0.0, "message": f"the autograder failed ({type(exc).__name__}: {exc})"}
    (results / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    print(doc["message"])
    return 0


def _nbgrader(args) -> int:
    submitted = Path(args.submitted)
    if not submitted.is_dir():
        print(f"autograde nbgrader: no such folder: {submitted}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else submitted.parent / "autograded"
    rows = []
    for folder in sorted(p for p in submitted.glob("*/*") if p.is_dir() and not p.name.startswith(".")):
        student, assignment = folder.parent.name, folder.name
        paths = sorted(folder.glob("*.ipynb"))
        grades = _grade(paths, args) if paths else []
        target = out / student / assignment
        target.mkdir(parents=True, exist_ok=True)
        doc = {"student": student, "assignment": assignment, "score": sum(g.earned for g in grades),
               "max_score": sum(g.points for g in grades),
               "notebooks": [{**{k: v for k, v in dataclasses.asdict(g).items() if k != "parts"},
                              "earned": g.earned, "points": g.points,
                              "parts": [dataclasses.asdict(p) for p in g.parts]} for g in grades]}
        (target / "results.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
        rows += [(student, assignment, Path(g.path).name, g.exercise or "", g.earned, g.points, g.status)
                 for g in grades] or [(student, assignment, "", "", 0, 0, "no notebook")]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student", "assignment", "notebook", "exercise", "score", "max_score", "status"])
        w.writerows(rows)
    for r in rows:
        print(f"{r[0]}/{r[1]}/{r[2]}: {r[4]}/{r[5]} ({r[6]})")
    print(f"wrote {out / 'grades.csv'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fastpath_lib autograde``."""
    from fastpath_lib.grading.engine.cli import DEFAULT_TIMEOUT

    ap = argparse.ArgumentParser(prog="python -m fastpath_lib autograde",
                                 description="Grade the notebooks of a Gradescope, PrairieLearn or nbgrader layout "
                                             "and write the platform's results (docs/course-release.md).")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds per notebook (default {DEFAULT_TIMEOUT})")
    common.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    common.add_argument("--isolation", choices=("auto", "bwrap", "none"), default="bwrap",
                        help="run the learner's kernel in the sandbox (bubblewrap): bwrap (default: only there; "
                             "where it cannot start, each notebook is 'not graded' and the results say why), auto "
                             "(where it starts, else without it, saying why), none")
    sub = ap.add_subparsers(dest="layout", required=True)
    common.add_argument("--exercises", default="", metavar="EX[,EX]",
                        help="gradescope, prairielearn: the assignment's exercises (e.g. ex01,ex02); others uncounted")
    gs = sub.add_parser("gradescope", parents=[common], help="/autograder/submission -> /autograder/results")
    gs.add_argument("--submission", default="/autograder/submission")
    gs.add_argument("--results", default="/autograder/results")
    pl = sub.add_parser("prairielearn", parents=[common], help="JOB/student -> JOB/results/results.json")
    pl.add_argument("--job", default="/grade")
    nb = sub.add_parser("nbgrader", parents=[common], help="submitted/<student>/<assignment>/*.ipynb")
    nb.add_argument("submitted", help="nbgrader's submitted/ folder")
    nb.add_argument("--out", help="where to write grades.csv and the results (default: autograded/ beside it)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    try:
        args.exercises = _exercises(args.exercises)
    except ValueError as exc:
        print(f"autograde: --exercises: {exc}", file=sys.stderr)
        return 2
    if args.isolation == "bwrap":
        from fastpath_lib.grading.engine import sandbox

        if sandbox.problem() is not None:  # the results say it too, for each notebook: the platform shows why
            print(f"autograde: {sandbox.refusal(sandbox.problem())}", file=sys.stderr)
    return {"gradescope": _gradescope, "prairielearn": _prairielearn, "nbgrader": _nbgrader}[args.layout](args)


if __name__ == "__main__":
    sys.exit(main())
