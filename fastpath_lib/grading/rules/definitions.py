"""What defining the learner's functions runs, in the program the grader executes
(:func:`fastpath_lib.grading.rules.kernel_source.program`): a ``def`` evaluates its defaults, its annotations and its
decorators when it runs, before anything calls the function. The grader admits only definitions for which that runs
nothing of the learner's: literal defaults, annotations that name types, and a kernel's lone ``@triton.jit`` with
literal options.

>>> import ast
>>> fn = ast.parse("def k(X, B: tl.constexpr = 128, D=(lambda: 0)()):\\n    pass").body[0]
>>> definition_problem(fn, lambda dec: False)[:61]
'the parameter D of k has the default (lambda: 0)(): a default'
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from fastpath_lib.grading.engine.sources import dotted

__all__ = ["definition_problem", "literal", "type_expression"]


def literal(e) -> bool:
    """Whether ``e`` is a constant written out (a number, a string, ``None``, ``True``, a tuple of them, ...):
    evaluating it runs no code."""
    try:
        ast.literal_eval(e)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def type_expression(e) -> bool:
    """Whether ``e`` is an annotation made of literals and names (``tl.constexpr``, ``torch.Tensor``, ``float``),
    subscripted or joined with ``|`` (``tuple[torch.Tensor, int]``, ``torch.Tensor | None``): evaluating it reads
    names and calls only the types' own ``[]`` and ``|``, none of the learner's code (the program it is defined in
    holds only imports, literal constants and functions)."""
    if literal(e) or dotted(e):
        return True
    if isinstance(e, ast.Subscript):
        return type_expression(e.value) and type_expression(e.slice)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
        return type_expression(e.left) and type_expression(e.right)
    if isinstance(e, (ast.Tuple, ast.List)):
        return all(type_expression(x) for x in e.elts)
    return False


def _short(e) -> str:
    text = ast.unparse(e)
    return text if len(text) <= 60 else text[:57] + "..."


def definition_problem(fn: ast.FunctionDef, is_jit: Callable[[ast.expr], bool]) -> str | None:
    """What of the learner's ``def fn`` runs when the definition runs (a decorator, a default, an annotation), beyond
    literals, types named as annotations (:func:`type_expression`), and a lone ``@triton.jit`` (``is_jit``; its
    options literals) over a kernel; ``None`` when nothing does."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + [
        (x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    for param, default in defaults:
        if not literal(default):
            return (f"the parameter {param.arg} of {fn.name} has the default {_short(default)}: a default is a "
                    f"constant written out (a number, a string, None, True/False), since the grader runs nothing "
                    f"else of your code while it defines your functions")
    params = [x for x in positional + a.kwonlyargs + [a.vararg, a.kwarg] if x is not None]
    notes = [(f"the parameter {x.arg} of {fn.name}", x.annotation) for x in params if x.annotation is not None]
    for where, note in notes + ([(f"the return of {fn.name}", fn.returns)] if fn.returns else []):
        if not type_expression(note):
            return (f"{where} has the annotation {_short(note)}: an annotation is a constant or a type by name "
                    f"(tl.constexpr, torch.Tensor, tuple[int, int]), since the grader runs nothing else of your "
                    f"code while it defines your functions")
    for dec in fn.decorator_list:
        options = not isinstance(dec, ast.Call) or not dec.args and all(
            k.arg is not None and literal(k.value) for k in dec.keywords)
        if not (len(fn.decorator_list) == 1 and is_jit(dec) and options):
            return (f"{fn.name} is decorated with {_short(dec)}: define a kernel under @triton.jit (its options "
                    f"constants) and under nothing else, a host function under no decorator")
    return None
