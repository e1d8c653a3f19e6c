"""A check takes a learner's number or truth value in any type honest code returns: the solutions' answers, handed
back as numpy scalars or 0-d tensors (what ``df["rows"].min()``, ``np.isclose`` or a tensor reduction give), score
what the solutions score; no check compares a learner's value by Python type; and a feedback table that marks two
values different never shows them as the same text (issue 44, reader 8 item 1). In-process, no kernel."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it
pytest.importorskip("pandas")

from fastpath_lib import exercises as ex  # noqa: E402
from fastpath_lib.grading.engine import sources  # noqa: E402
from fastpath_lib.grading.report.feedback import real, table, truth  # noqa: E402
from tests.solved import earned, solved  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "fastpath_lib" / "grading" / "checks"


def _numpy(v):
    """``v`` with each bool, int and float in numpy's types (a float as float32 where that is exact, since numpy's
    float64 is a subclass of ``float``)."""
    if isinstance(v, bool):
        return np.bool_(v)
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float32(v) if float(np.float32(v)) == v else np.longdouble(v)
    return _inside(v, _numpy)


def _tensor(v):
    """``v`` with each bool, int and float as a 0-d tensor."""
    if isinstance(v, bool | int):
        return torch.tensor(v)
    if isinstance(v, float):
        return torch.tensor(v, dtype=torch.float64)
    return _inside(v, _tensor)


def _inside(v, conv):
    if isinstance(v, dict):
        return {k: conv(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set | frozenset):
        return type(v)(conv(x) for x in v)
    return v


def _answering(fn, conv):
    @functools.wraps(fn)
    def answer(*args, **kwargs):
        return conv(fn(*args, **kwargs))
    return answer


def _ex12_overlaps(fn):
    cells = [c.source for c in __import__("jupytext").read(ROOT / "solutions/ex12_fused_inplace_contract.py").cells
             if "def overlaps" in c.source]
    with sources.using(cells):
        return ex.check_overlaps(fn, show=False)


#: each check whose learner function returns numbers or truth values: (exercise, the solution's function, grade)
GRADED = {
    "ex01 default_eps": ("ex01", "my_default_eps", lambda fn: ex.check_default_eps(fn, show=False)),
    "ex10 threshold": ("ex10", "choose_threshold", lambda fn: ex.check_threshold(fn, show=False)),
    "ex12 overlaps": ("ex12", "overlaps", _ex12_overlaps),
    "ex13 maintenance_cost": ("ex13", "maintenance_cost",
                              lambda fn: ex.check_readiness("maintenance_cost", fn, show=False, seed=0)),
    "ex13 contract_change": ("ex13", "migration",
                             lambda fn: ex.check_readiness("contract_change", fn, show=False, seed=0)),
}


@pytest.mark.parametrize("conv", [_numpy, _tensor], ids=["numpy", "0-d tensor"])
@pytest.mark.parametrize("name", sorted(GRADED))
def test_the_solutions_answers_in_numpy_or_tensor_types_score_the_same(name, conv):
    exercise, fn, grade = GRADED[name]
    sol = solved(exercise)[fn]
    want = grade(sol)
    got = grade(_answering(sol, conv))
    assert earned(want) == sum(r.points for r in want), [r.feedback for r in want]
    assert earned(got) == earned(want), [r.feedback for r in got]


def _by_python_type(tree) -> list[str]:
    """``isinstance(v, int | float | bool ...)``, ``type(v) is bool`` and ``v is True`` (but ``truth(v) is True``):
    each refuses the same number or truth value in numpy's or torch's types."""
    found = []
    plain = {"int", "float", "bool", "complex"}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "isinstance" and len(n.args) == 2:
            names = {getattr(e, "id", None) for e in ast.walk(n.args[1]) if isinstance(e, ast.Name)}
            if names & plain:
                found.append(f"line {n.lineno}: {ast.unparse(n)}")
        if isinstance(n, ast.Compare) and any(isinstance(o, ast.Is | ast.IsNot | ast.Eq | ast.NotEq) for o in n.ops):
            sides = [n.left, *n.comparators]
            said = [s for s in sides if not (isinstance(s, ast.Constant) and isinstance(s.value, bool))]
            if len(said) < len(sides) and any(isinstance(o, ast.Is | ast.IsNot) for o in n.ops) and not all(
                    isinstance(s, ast.Call) and getattr(s.func, "id", None) == "truth" for s in said):
                found.append(f"line {n.lineno}: {ast.unparse(n)}")
            if any(isinstance(s, ast.Call) and getattr(s.func, "id", None) == "type" for s in sides) and any(
                    isinstance(s, ast.Name) and s.id in plain for s in sides):
                found.append(f"line {n.lineno}: {ast.unparse(n)}")
    return found


def test_no_check_compares_a_value_by_python_type():
    """``feedback.real`` and ``feedback.truth`` take a number or a truth value in any honest type; a check that tests
    ``isinstance(v, int)`` refuses ``np.int64`` (not a subclass of ``int``)."""
    found = {p.name: _by_python_type(ast.parse(p.read_text())) for p in sorted(CHECKS.glob("ex*.py"))}
    assert not {k: v for k, v in found.items() if v}, found
    planted = ast.parse("def _same(a, b):\n    return isinstance(a, (int, float)) and a == b\n"
                        "ok = out['own_commit'] is True or type(got) is bool or truth(got) is True\n")
    assert len(_by_python_type(planted)) == 3


def test_real_and_truth_take_every_honest_type_and_no_bool_for_a_number():
    for v in (16, 16.0, np.int64(16), np.int32(16), np.float32(16), torch.tensor(16), torch.tensor(16.0),
              np.array(16)):
        assert real(v) == 16.0, type(v)
    for v in (True, np.bool_(True), torch.tensor(True), "16", None, [16], torch.tensor([16]), np.array([16])):
        assert real(v) is None, v
    for v in (True, np.bool_(True), torch.tensor(True)):
        assert truth(v) is True, type(v)
    for v in (1, np.int64(1), 1.0, "True", None, torch.tensor([True])):
        assert truth(v) is None, v


def test_a_table_never_shows_two_values_it_marks_different_as_one_text():
    text = table([("x", "1024", 1024, "<-- differs"), ("y", 16, 16, "")], ("table", "yours", "expected", ""))
    assert "1024 (str)" in text and "1024 (int)" in text, text
    assert "16 (" not in text, text  # same type, same text: shown as it is
    # and in a check: a threshold given as text is marked different, with its type shown
    sol = solved("ex10")["choose_threshold"]
    results = ex.check_threshold(_answering(sol, lambda d: {k: None if v is None else str(v) for k, v in d.items()}),
                                 show=False)
    assert earned(results) == 0 and "(str)" in results[0].feedback and "(int)" in results[0].feedback, \
        results[0].feedback
