"""The rule a ``@triton.jit`` function's body is held to (:func:`body_problem`), for
:func:`~fastpath_lib.grading.rules.kernel_source.kernel_problem`: what a kernel body may read and contain.
"""

from __future__ import annotations

import ast

from fastpath_lib.grading.engine.compile_check import kernel_builtins
from fastpath_lib.grading.engine.sources import dotted
from fastpath_lib.grading.rules.language_names import compiled_kinds, outside_language, published_attributes

__all__ = ["body_problem", "PUBLISHED_RULE", "DECORATOR_RULE"]

#: The attribute rule (:func:`~fastpath_lib.grading.rules.language_names.published_attributes`) in the exercises'
#: words (each exercise whose check applies it states it: ``STATED`` of its check module).
PUBLISHED_RULE = "an attribute no value of `triton.language` publishes"

#: How a kernel is defined, in the exercises' words (:func:`~fastpath_lib.grading.rules.definitions.definition_problem`
#: refuses any other decorator over it): the grader compiles and replays the ``@triton.jit`` function itself.
DECORATOR_RULE = "a kernel is defined under `@triton.jit` alone (not under `@triton.autotune` or `@triton.heuristics`)"


def _language(path: str) -> bool:
    """Whether ``path`` (a dotted name, resolved) names Triton's language itself: ``triton.language`` or a public
    name under it (:func:`~fastpath_lib.grading.rules.language_names.outside_language` reads those)."""
    return path == "triton.language" or path.startswith("triton.language.") and not path.startswith(
        "triton.language._")


def _unpublished(src, n: ast.Attribute, local: set) -> ast.Attribute | None:
    """The first attribute of the chain ``n`` ends (``a.b.c``: ``.b`` before ``.c``) read past a value and published
    by no value of Triton's language (:func:`~fastpath_lib.grading.rules.language_names.published_attributes`), else
    ``None``. A chain from an imported name is a dotted name, read by the other rules (Triton's language by
    :func:`~fastpath_lib.grading.rules.language_names.outside_language`, any other module refused)."""
    chain = []
    while isinstance(n, ast.Attribute):
        chain.append(n)
        n = n.value
    if isinstance(n, ast.Name) and n.id in src.imports and n.id not in local:
        return None
    return next((a for a in reversed(chain) if not _language(src.resolve(dotted(a)))
                 and a.attr not in published_attributes()), None)


def _constexpr_globals(src) -> tuple[set[str], set[str]]:
    """The module constants of ``src`` a kernel body may read, those whose value is a ``tl.constexpr``
    (``EPS = tl.constexpr(1e-6)``, annotated or not), and those only annotated ``tl.constexpr``
    (``EPS: tl.constexpr = 1e-6``), which Triton's frontend refuses: it reads a global by its value, not by its
    annotation (``CodeGenerator._is_constexpr_global`` in ``triton/compiler/code_generator.py``)."""
    made, annotated = set(), set()
    for n in (n for t in src.trees for n in t.body):
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) \
                and src.resolve(dotted(n.annotation)) == "triton.language.constexpr":
            annotated.add(n.target.id)
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call) \
                and src.resolve(dotted(n.value.func)) == "triton.language.constexpr":
            made |= {t.id for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    return made, annotated - made


def body_problem(src, fn: ast.FunctionDef) -> str | None:
    """Why the body of ``fn``, a ``@triton.jit`` function of the learner's source ``src`` (the source as
    :mod:`~fastpath_lib.grading.rules.kernel_source` reads it: its imports, trees and kernels), is not a kernel body:
    it reads something else than its parameters, its own variables, the source's module constants whose value is a
    ``tl.constexpr`` (:func:`_constexpr_globals`) and other kernels, Triton's language and the builtins the frontend
    provides that the grader accepts (:func:`~fastpath_lib.grading.engine.compile_check.kernel_builtins`); past a
    value (a parameter, a variable, what a call returns) an attribute no value of Triton's language publishes
    (:func:`~fastpath_lib.grading.rules.language_names.published_attributes`); syntax Triton's frontend does not
    compile (:func:`~fastpath_lib.grading.rules.language_names.compiled_kinds`: a generator expression, a lambda);
    or it defines or imports something."""
    a = fn.args
    local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
    local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    constexpr, annotated = _constexpr_globals(src)
    for stmt in fn.body:
        inner = {id(n.value) for n in ast.walk(stmt) if isinstance(n, ast.Attribute)}
        for n in ast.walk(stmt):
            path = src.resolve(dotted(n)) if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in inner \
                and not (isinstance(n, ast.Name) and n.id in local) else ""
            if _language(path):
                outside = outside_language(path)
                if outside:
                    return (f"your kernel {fn.name} reads {ast.unparse(n)}, and {outside} is not Triton's "
                            f"language (a module of its own, or a function, type or constant of triton.language): a "
                            f"kernel body uses triton.language's functions, types and constants")
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Import,
                              ast.ImportFrom, ast.Global, ast.Nonlocal)):
                return f"your kernel {fn.name} defines or imports something inside it: a kernel body only computes"
            if isinstance(n, (ast.stmt, ast.expr)) and type(n).__name__ not in compiled_kinds():
                code = ast.unparse(n).splitlines()[0][:60]
                return (f"your kernel {fn.name} holds {code} (an ast.{type(n).__name__}, line "
                        f"{n.lineno - fn.lineno + 1} of {fn.name}, its def the first), which Triton's compiler does "
                        f"not compile: a kernel body is code Triton compiles for a GPU")
            unpublished = _unpublished(src, n, local) if isinstance(n, ast.Attribute) else None
            if unpublished is not None:
                return (f"your kernel {fn.name} reads {unpublished.attr} of {ast.unparse(unpublished.value)[:80]}, "
                        f"which no value of Triton's language publishes: past a value, a kernel body reads what "
                        f"tensors, dtypes and constexprs publish (x.dtype, x.shape, x.to(...), X.dtype.element_ty)")
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
                target = src.resolve(n.id)
                ok = n.id in src.kernels or n.id in constexpr or target.startswith("triton.language") or (
                    n.id in kernel_builtins() and n.id not in src.imports)
                if target == "triton":  # triton.language.x, reached through "triton"
                    parent = next((p for p in ast.walk(stmt) if isinstance(p, ast.Attribute) and p.value is n), None)
                    ok = parent is not None and parent.attr == "language"
                if not ok and n.id in annotated:
                    return (f"your kernel {fn.name} reads {n.id}, a module constant annotated tl.constexpr but not "
                            f"made one: Triton's compiler reads a module constant only when its value is a "
                            f"constexpr, so write {n.id} = tl.constexpr(...)")
                if not ok:
                    return (f"your kernel {fn.name} reads {n.id}: a kernel body uses triton.language, its parameters, "
                            f"its own variables, your other @triton.jit functions and module constants made constexpr "
                            f"by value (EPS = tl.constexpr(1e-6)), nothing else")
    return None
