"""What a submission holds, read before anything is graded: which exercise each notebook is, one notebook per
exercise, and which parts this copy of the kit can grade at all.

* :func:`one_per_exercise`: a submission holds one answer per exercise. Copies of one exercise's notebook (the same
  file twice, a renamed copy) are one answer, graded once: the copy named as the exercise hands it out, else the first
  by path, chosen before grading and never by score (the graders' aggregation,
  :func:`fastpath_lib.grading.engine.autograde.grade_notebooks`, lists each other copy and names the one graded).
* :func:`held_parts`: a course's student release leaves out the checks that grade against faults or keys
  (:mod:`fastpath_lib.release`); its grader lists their parts as graded by the autograder only, outside the score.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

from fastpath_lib.grading.engine import notebook as NB
from fastpath_lib.grading.registry import CHECKS, EXERCISES
from fastpath_lib.runtime import parse_source

__all__ = ["exercise_id", "exercise_of_file", "handed_out_name", "one_per_exercise", "shipped", "held_parts"]


def exercise_id(nb, path: Path) -> str | None:
    """The exercise of a notebook: its ``metadata.fastpath.exercise``, else its file name's ``exNN_`` (``None`` for
    neither)."""
    meta = (nb.get("metadata", {}) if nb is not None else {}).get("fastpath", {}) if nb is not None else {}
    ex = meta.get("exercise") if isinstance(meta, dict) else None
    if ex in EXERCISES:
        return ex
    m = re.match(r"(ex\d\d)", path.name)
    return m.group(1) if m and m.group(1) in EXERCISES else None


def exercise_of_file(path: Path) -> str | None:
    """The exercise a notebook file is for, read as the grader reads it (``None`` when unreadable or not an
    exercise's)."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - grading the file says why
        nb = None
    return exercise_id(nb if isinstance(nb, dict) else None, Path(path))


def handed_out_name(ex: str) -> str | None:
    """The file name the exercise's notebook is handed out under (``ex01_reference.ipynb``)."""
    original = NB.original_for(ex)
    return original.name if original is not None else None


def one_per_exercise(paths) -> tuple[list[Path], dict[Path, tuple[str, Path]]]:
    """One notebook per exercise: ``(the notebooks to grade, {each other copy: (its exercise, the copy graded)})``.

    The copy graded is the one whose file name is the name the exercise hands out (:func:`handed_out_name`), else
    the first by path. Notebooks of no exercise are all kept (each is reported as such).

    >>> kept, others = one_per_exercise([Path("b/ex01_x.ipynb"), Path("a/ex01_y.ipynb"), Path("ex02_z.ipynb")])
    >>> [str(p) for p in kept], {str(k): (e, str(v)) for k, (e, v) in others.items()}
    (['a/ex01_y.ipynb', 'ex02_z.ipynb'], {'b/ex01_x.ipynb': ('ex01', 'a/ex01_y.ipynb')})
    """
    paths = [Path(p) for p in paths]
    by_ex: dict[str, list[Path]] = {}
    for p in paths:
        ex = exercise_of_file(p)
        if ex is not None:
            by_ex.setdefault(ex, []).append(p)
    others: dict[Path, tuple[str, Path]] = {}
    for ex, copies in by_ex.items():
        if len(copies) > 1:
            name = handed_out_name(ex)
            chosen = min(copies, key=lambda c: (c.name != name, str(c)))
            others |= {c: (ex, chosen) for c in copies if c != chosen}
    return [p for p in paths if p not in others], others


def shipped(module: str) -> bool:
    """Whether this copy of the kit holds the check module ``module`` (``checks.ex04_boundary``)."""
    return importlib.util.find_spec(f"fastpath_lib.grading.{module}") is not None


def held_parts(ex: str) -> tuple[str, ...]:
    """The parts of ``ex`` this copy of the kit cannot grade, because the checks that grade them are left out (a
    course's student release): every part when no check module of ``ex`` is here, else the parts that no check
    module here names (a part is named by its check, ``passed("ex08", "evidence_package", ...)``). Empty in the
    full kit and the autograder."""
    modules = {CHECKS[n] for n in CHECKS if CHECKS[n].startswith(f"checks.{ex}")}
    here = {m for m in modules if shipped(m)}
    if here == modules:
        return ()
    named: set[str] = set()
    for m in here:
        tree = parse_source(Path(importlib.util.find_spec(f"fastpath_lib.grading.{m}").origin).read_text("utf-8"))
        named |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return tuple(part for part, _ in EXERCISES[ex] if part not in named)
