"""The grader's sandbox hands each exercise's kernel nothing its checks forbid (issue 41).

For every exercise: the functions its checks refuse (:func:`fastpath_lib.grading.registry.forbidden`, by file and
qualified name) are defined in no module staged for its kernel (:func:`~fastpath_lib.grading.engine.handout.
kernel_library`), and the stand-ins generated for it hold nothing but raising stubs. A module is handed out whole, so
a module that defines a forbidden function beside a handed-out name hands the forbidden one out too, where only the
call watch and the source read stood in the way.

A target over a whole folder (``borrowed.kit("grading")``, ``borrowed.kit("bench")``) is read for the modules of
that folder beyond what every kernel is given by design: the floor (``kernel_library(None)``: the façade's materials
and what the grader's agent imports) and what the functions the exercise's checks hand the learner's code
(``Given``) import. A target that names a function, or a whole file, holds everywhere, the floor included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fastpath_lib import runtime
from fastpath_lib.grading import registry
from fastpath_lib.grading.engine import handout


def _defined(source: str) -> dict[str, ast.AST]:
    """qualified name -> node, for every function and class a module's source defines (methods included)."""
    out: dict[str, ast.AST] = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")
    walk(ast.parse(source).body, "")
    return out


def _file(module: str) -> Path:
    return handout._module_file(module, runtime.ROOT).resolve()


def _under(path: Path, target: Path) -> bool:
    return path == target or target in path.parents


def leaks(exercise: str, staged: tuple[str, ...] | None = None) -> list[str]:
    """``"<module> defines <qualname> (<why>)"`` for each forbidden function of ``exercise`` a staged module defines."""
    staged = handout.kernel_library(exercise) if staged is None else staged
    exempt = set(handout.kernel_library(None))
    exempt |= set(handout.closure(m for m in staged if any(
        _under(_file(m), Path(f).resolve()) for f, _, _ in registry.forbidden(exercise, "Given"))))
    out = []
    for module in staged:
        if module in (handout.PACKAGE, handout.FACADE):  # generated for the kernel (package_source, facade_source)
            continue
        path = _file(module)
        defined = _defined(path.read_text(encoding="utf-8"))
        for file, qual, why in registry.forbidden(exercise):
            target = Path(file).resolve()
            if not _under(path, target) or (qual == "*" and target.is_dir() and module in exempt):
                continue
            hits = sorted(defined) if qual == "*" else [q for q in defined if q == qual]
            out += [f"{module} defines {q} ({why})" for q in hits[:3]]
        # a function a check names, moved or copied out of its file into a module that is handed out (or made a
        # method there), is still it
        out += [f"{module} defines {d}, a name {exercise} forbids in {Path(file).name} ({why})" for file, q, why in
                registry.forbidden(exercise) if q != "*" and not _under(path, Path(file).resolve())
                for d in defined if d.rsplit(".", 1)[-1] == q.rsplit(".", 1)[-1]]
    return out


@pytest.mark.parametrize("exercise", sorted(registry.EXERCISES))
def test_no_module_staged_for_an_exercise_defines_a_function_its_checks_forbid(exercise):
    assert registry.forbidden(exercise), f"{exercise}'s checks declare nothing forbidden: the registry misread them"
    assert leaks(exercise) == []


@pytest.mark.parametrize("exercise", sorted(registry.EXERCISES))
def test_the_stand_ins_hold_only_raising_stubs(exercise):
    for module, source in handout.stand_in_modules(exercise).items():
        for name, node in _defined(source).items():
            if name == "__getattr__":
                continue
            assert [type(s) for s in node.body] == [ast.Raise], f"{exercise}: {module}'s stand-in {name} does more"


def test_a_forbidden_function_beside_a_handed_out_one_is_found():
    """The test can fail: the whole of bench.analysis (``classify`` beside ``outcome``) staged for exercise 13."""
    staged = (*handout.kernel_library("ex13"), "fastpath_lib.bench.analysis")
    assert any("fastpath_lib.bench.analysis defines classify" in line for line in leaks("ex13", staged))
    staged = (*handout.kernel_library("ex13"), "fastpath_lib.rmsnorm.predicate")  # a whole forbidden file
    assert any(line.startswith("fastpath_lib.rmsnorm.predicate defines ") for line in leaks("ex13", staged))
    staged = (*handout.kernel_library("ex04"), "fastpath_lib.boundary")  # a named function moved out of its file
    assert "fastpath_lib.boundary defines overrides" in "\n".join(leaks("ex04", staged))
    assert any(line.startswith("fastpath_lib.rmsnorm.predicate defines ") for line in leaks("ex13", staged))
