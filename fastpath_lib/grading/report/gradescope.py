"""Gradescope's autograder ``results.json`` from the grader's results, and a check of it against the specification.

Gradescope runs an autograder's ``run_autograder`` script and uploads ``/autograder/results/results.json``
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): a top-level ``score`` (required unless every test
carries one) and a ``tests`` list whose entries hold ``name``, ``score``, ``max_score``, ``status``, ``output``,
``number``, ``visibility`` ... . :func:`results_json` turns the grader's
:class:`~fastpath_lib.grading.engine.cli.NotebookGrade` list into that document: one test per graded part
(``ex03 alignment_condition``, worth the part's points), its feedback as the test's output, and one informational
test (status only, no points) for a notebook that has no parts to list (not an exercise). The top-level ``output``
names each notebook's status, so a tampered, timed-out or crashed notebook is said in words, not only as zeros.

:data:`SCHEMA` is the specification's output format written as a JSON Schema (draft 7), and :func:`validate` checks a
document against it in plain Python (the subset of JSON Schema the schema uses), plus the two rules the schema cannot
say: a top-level ``score`` unless every test has one, and no test scoring more than its ``max_score``.

>>> from fastpath_lib.grading.engine.cli import NotebookGrade, PartGrade
>>> g = NotebookGrade("ex01_reference.ipynb", "ex01", "ok", "", 4.2,
...                   [PartGrade("ex01", "default_eps", 1, 1, True, "passed"),
...                    PartGrade("ex01", "reference", 2, 0, False, "yours vs expected ...")])
>>> doc = results_json([g])
>>> doc["score"], [(t["name"], t["score"], t["max_score"], t["status"]) for t in doc["tests"]]
(1, [('ex01 default_eps', 1, 1, 'passed'), ('ex01 reference', 0, 2, 'failed')])
>>> validate(doc)
[]
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from fastpath_lib.grading.registry import TITLES

__all__ = ["SCHEMA", "VISIBILITY", "results_json", "validate", "write"]

#: Gradescope's visibility values (tests, the whole result, and stdout).
VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")
_FORMATS = ("text", "html", "simple_format", "md", "ansi")
_VIS = {"type": "string", "enum": list(VISIBILITY)}
_FORMAT = {"type": "string", "enum": list(_FORMATS)}

#: Gradescope's ``results.json`` output format as a JSON Schema (draft 7). Field names and enumerations follow the
#: specification; unknown fields are refused so a misspelt key (``max_points``) is caught, not silently ignored.
SCHEMA: dict = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Gradescope autograder results.json",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": _FORMAT,
        "test_output_format": _FORMAT,
        "test_name_format": _FORMAT,
        "visibility": _VIS,
        "stdout_visibility": _VIS,
        "extra_data": {"type": "object"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number", "minimum": 0},
                    "status": {"type": "string", "enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "name_format": _FORMAT,
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": _FORMAT,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": _VIS,
                    "extra_data": {"type": "object"},
                },
            },
        },
        "leaderboard": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "properties": {"name": {"type": "string"}, "value": {"type": ["number", "string"]},
                               "order": {"type": "string", "enum": ["asc", "desc"]}},
            },
        },
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
}


def _test_name(exercise: str, part: str) -> str:
    return f"{exercise} {part}"


def _notebook_line(g) -> str:
    title = TITLES.get(g.exercise or "", "")
    head = f"{Path(g.path).name}: {g.earned}/{g.points}" + (f" ({title})" if title else "")
    line = f"{head}: {g.status}" + (f": {g.reason}" if g.reason else "")
    line += f" [kernel {getattr(g, 'isolation', 'unisolated')}]"
    return "\n".join([line] + [f"  note: {n}" for n in g.notes])


def results_json(grades, *, visibility: str | None = None, stdout_visibility: str | None = None) -> dict:
    """Gradescope's ``results.json`` document for the grader's results.

    Args:
        grades: :class:`~fastpath_lib.grading.engine.cli.NotebookGrade` objects (read by attribute: ``path``,
        ``exercise``,
            ``status``, ``reason``, ``seconds``, ``parts``, ``notes``, ``earned``, ``points``, ``isolation``:
            whether the learner's kernel ran in a sandbox, "unisolated" when absent).
        visibility: when the tests are shown to students (one of :data:`VISIBILITY`); Gradescope's default
            (``visible``) when omitted.
        stdout_visibility: when the grader's printed table is shown to students; Gradescope's default (instructors
            only) when omitted.

    Returns:
        A dict ready for ``json.dump``: ``score`` (points earned over all notebooks), ``execution_time`` (whole
        seconds), ``output`` (each notebook's score and status), ``tests`` (one per graded part, numbered
        ``<exercise number>.<part number>``), ``extra_data`` (``max_score`` and each notebook's status).
    """
    for what, value in (("visibility", visibility), ("stdout_visibility", stdout_visibility)):
        if value is not None and value not in VISIBILITY:
            raise ValueError(f"{what} must be one of {', '.join(VISIBILITY)}; got {value!r}")
    tests = []
    for g in grades:
        if not g.parts:
            tests.append({"name": Path(g.path).name, "status": "failed", "output": f"{g.status}: {g.reason}",
                          "tags": ["not graded"]})
            continue
        ex_number = (g.exercise or "ex00")[2:].lstrip("0") or "0"
        for i, p in enumerate(g.parts, start=1):
            output = p.feedback
            if g.status != "ok":  # the notebook-level verdict travels with every part it cost points
                output += f"\n\n(notebook {Path(g.path).name}: {g.status}" + (f": {g.reason}" if g.reason else "") + ")"
            tests.append({"name": _test_name(p.exercise, p.part), "number": f"{ex_number}.{i}",
                          "score": p.earned, "max_score": p.points, "status": "passed" if p.passed else "failed",
                          "output": output, "tags": [p.exercise]})
    if visibility is not None:
        for t in tests:
            t["visibility"] = visibility
    doc = {
        "score": sum(g.earned for g in grades),
        "execution_time": int(math.ceil(sum(g.seconds for g in grades))),
        "output": "\n".join(_notebook_line(g) for g in grades) or "no notebooks were graded",
        "tests": tests,
        "extra_data": {"max_score": sum(g.points for g in grades),
                       "notebooks": [{"path": str(g.path), "exercise": g.exercise, "status": g.status,
                                      "reason": g.reason, "seconds": g.seconds,
                                      "isolation": getattr(g, "isolation", "unisolated")} for g in grades]},
    }
    if visibility is not None:
        doc["visibility"] = visibility
    if stdout_visibility is not None:
        doc["stdout_visibility"] = stdout_visibility
    return doc


def write(grades, path: str | Path, **kwargs) -> dict:
    """Write :func:`results_json` to ``path`` (e.g. ``/autograder/results/results.json``) after validating it."""
    doc = results_json(grades, **kwargs)
    errors = validate(doc)
    if errors:  # a bug in this module, never the learner's doing: say what is wrong instead of uploading it
        raise ValueError("results.json does not match Gradescope's format:\n" + "\n".join(errors))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return doc


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _is_type(value, name: str) -> bool:
    if name in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return math.isfinite(value) and (name == "number" or float(value).is_integer())
    return isinstance(value, _TYPES[name])


def _check(value, schema: dict, where: str, errors: list[str]) -> None:
    """The JSON Schema keywords :data:`SCHEMA` uses: type, enum, minimum, required, properties,
    additionalProperties, items, anyOf."""
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_is_type(value, n) for n in names):
            errors.append(f"{where}: expected {' or '.join(names)}, got {type(value).__name__} {value!r:.60}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: {value!r} is below the minimum {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: missing required field {key!r}")
        props = schema.get("properties", {})
        for key, sub in value.items():
            if key in props:
                _check(sub, props[key], f"{where}.{key}", errors)
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unknown field {key!r} (Gradescope's fields: {', '.join(props)})")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{where}[{i}]", errors)
    if "anyOf" in schema:
        branches = []
        for sub in schema["anyOf"]:
            branch: list[str] = []
            _check(value, sub, where, branch)
            branches.append(branch)
        if all(branches):
            errors.append(f"{where}: matches none of the alternatives: " + "; ".join(b[0] for b in branches))


def validate(doc, schema: dict = SCHEMA) -> list[str]:
    """Every way ``doc`` departs from Gradescope's ``results.json`` format (empty when it conforms).

    Checks :data:`SCHEMA`, then the specification's rules across fields: a top-level ``score`` unless every test
    has a ``score``, and no test with a ``score`` above its ``max_score`` or a ``score`` without a ``max_score``
    (the kit gives no extra credit).
    """
    errors: list[str] = []
    _check(doc, schema, "results", errors)
    if errors or not isinstance(doc, dict):
        return errors
    tests = doc.get("tests", [])
    if "score" not in doc and not all("score" in t for t in tests):
        errors.append("results: no top-level score, and not every test has a score")
    for i, t in enumerate(tests):
        if "score" in t and "max_score" not in t:
            errors.append(f"results.tests[{i}]: a score without a max_score")
        elif "score" in t and t["score"] > t["max_score"]:
            errors.append(f"results.tests[{i}]: score {t['score']} above max_score {t['max_score']}")
    return errors
