"""The rule a ``@triton.jit`` function's body is held to (:func:`body_problem`), for
:func:`~fastpath_lib.grading.rules.kernel_source.kernel_problem`: what a kernel body may read and contain.
"""

from __future__ import annotations

import ast

from fastpath_lib.grading.engine.sources import dotted
from fastpath_lib.grading.rules.language_names import outside_language

__all__ = ["body_problem"]

#: Builtins a kernel body may call (Triton's frontend accepts these).
_KERNEL_BUILTINS = frozenset({"range", "min", "max", "int", "float", "bool", "len", "print", "isinstance"})
#: Attributes that reach the compiler's IR or the interpreter's NumPy arrays behind a Triton value (a name under
#: ``triton.language`` is read by
#: :func:`~fastpath_lib.grading.rules.language_names.outside_language` instead).
_KERNEL_INTERNALS = frozenset({"handle", "core", "ir", "semantic", "builder"})


def body_problem(src, fn: ast.FunctionDef) -> str | None:
    """Why the body of ``fn``, a ``@triton.jit`` function of the learner's source ``src`` (the source as
    :mod:`~fastpath_lib.grading.rules.kernel_source` reads it: its imports, trees and kernels), is not a kernel body:
    it reads something else than its parameters, its own variables, the source's ``tl.constexpr`` constants and other
    kernels, Triton's language and the builtins the frontend provides, or defines or imports something."""
    a = fn.args
    local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None}
    local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    top = [n for t in src.trees for n in t.body]
    constexpr = {n.target.id for n in top if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                 and src.resolve(dotted(n.annotation)) == "triton.language.constexpr"}
    constexpr |= {t.id for n in top if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                  and src.resolve(dotted(n.value.func)) == "triton.language.constexpr"
                  for t in n.targets if isinstance(t, ast.Name)}
    for stmt in fn.body:
        inner = {id(n.value) for n in ast.walk(stmt) if isinstance(n, ast.Attribute)}
        for n in ast.walk(stmt):
            path = src.resolve(dotted(n)) if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in inner \
                and not (isinstance(n, ast.Name) and n.id in local) else ""
            if path.startswith("triton.language.") and not path.startswith("triton.language._"):
                outside = outside_language(path)
                if outside:
                    return (f"your kernel {fn.name} reads {ast.unparse(n)}, and {outside} is not Triton's "
                            f"language (a module of its own, or a function, type or constant of triton.language): a "
                            f"kernel body uses triton.language's functions, types and constants")
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Import,
                              ast.ImportFrom, ast.Global, ast.Nonlocal)):
                return f"your kernel {fn.name} defines or imports something inside it: a kernel body only computes"
            if isinstance(n, ast.Attribute) and n.attr.startswith("_"):
                return f"your kernel {fn.name} reads the private attribute {n.attr}"
            if isinstance(n, ast.Attribute) and n.attr in _KERNEL_INTERNALS and \
                    not src.resolve(dotted(n)).startswith("triton.language."):
                return (f"your kernel {fn.name} reads {n.attr}, the compiler's or the interpreter's own object "
                        f"behind a value: a kernel body computes with triton.language")
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local:
                target = src.resolve(n.id)
                ok = n.id in src.kernels or n.id in constexpr or target.startswith("triton.language") or (
                    n.id in _KERNEL_BUILTINS and n.id not in src.imports)
                if target == "triton":  # triton.language.x, reached through "triton"
                    parent = next((p for p in ast.walk(stmt) if isinstance(p, ast.Attribute) and p.value is n), None)
                    ok = parent is not None and parent.attr == "language"
                if not ok:
                    return (f"your kernel {fn.name} reads {n.id}: a kernel body uses triton.language, its parameters, "
                            f"its own variables and your other @triton.jit functions, nothing else")
    return None
