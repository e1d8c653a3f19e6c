"""The int64 rule on a kernel's offsets (:func:`offset_problem`), for
:func:`~fastpath_lib.grading.rules.kernel_source.kernel_problem`: no program id is multiplied in int32 by a value known
only at run time.

A row offset ``row * row_stride`` computed in int32 is right on every input the grader can allocate and wraps on a
tensor past 2**31 elements. A probe that runs the kernel at a far row
(:mod:`~fastpath_lib.grading.engine.far_rows`) sees it only for the layout it moves (one program per row on axis 0): a
kernel given the row count and guarding ``row < n_rows``, a 2-D grid, or several rows per program computes the same
wrapping product where the probe does not reach. The source says it whatever the layout: a product in which one
factor is derived from ``tl.program_id`` (any axis) without a conversion to int64, and the other is known only at run
time (a parameter that is not a ``tl.constexpr``, or anything computed from one), is int32 arithmetic on a quantity
that grows with the input. A program id converted first (``tl.program_id(0).to(tl.int64)``, ``tl.cast(...,
tl.int64)``), or converted where it is multiplied (``row.to(tl.int64) * stride``), passes; so does a product with a
compile-time constant (``tl.program_id(1) * BLOCK``, a column tile).

>>> import ast
>>> from fastpath_lib.grading.rules.kernel_source import _Source
>>> src = _Source('''
... import triton
... import triton.language as tl
... @triton.jit
... def k(X, stride, B: tl.constexpr):
...     row = tl.program_id(0)
...     tl.store(X + row * stride + tl.arange(0, B), 0.0)
... ''')
>>> fn = next(n for n in ast.walk(src.trees[0]) if isinstance(n, ast.FunctionDef))
>>> offset_problem(src, fn)[:62]
'row offsets wrap in int32: your kernel k computes row * stride'
>>> src = _Source(ast.unparse(src.trees[0]).replace("tl.program_id(0)", "tl.program_id(0).to(tl.int64)"))
>>> offset_problem(src, next(n for n in ast.walk(src.trees[0]) if isinstance(n, ast.FunctionDef))) is None
True
"""

from __future__ import annotations

import ast

from fastpath_lib.grading.engine.sources import dotted

__all__ = ["offset_problem", "INT64_RULE"]

#: The rule in the exercises' words (exercises 02 and 08 state it: ``STATED`` of their check modules).
INT64_RULE = ("a program id (`tl.program_id`, any axis) multiplied in int32 by a value known only at run time (a "
              "stride, a row count, a width not passed as `tl.constexpr`)")

_PROGRAM_ID = "triton.language.program_id"
_INT64 = "triton.language.int64"


def _to_int64(src, n: ast.AST) -> bool:
    """Whether ``n`` is a conversion to int64: ``v.to(tl.int64)`` or ``tl.cast(v, tl.int64)``."""
    if not isinstance(n, ast.Call):
        return False
    args = list(n.args) + [k.value for k in n.keywords]
    if isinstance(n.func, ast.Attribute) and n.func.attr == "to":
        return any(src.resolve(dotted(a)) == _INT64 for a in args)
    return src.resolve(dotted(n.func)) == "triton.language.cast" and \
        any(src.resolve(dotted(a)) == _INT64 for a in args[1:])


def _memory(src, n: ast.Call) -> bool:
    """Whether ``n`` reads memory (``tl.load``, ``tl.atomic_add``, ``desc.load(...)``): its value is data, not an
    index, whatever the address it reads."""
    name = dotted(n.func) or ""
    last = src.resolve(name).rpartition(".")[2] if name else getattr(n.func, "attr", "")
    return last == "load" or last.startswith("atomic_")


def _reads(src, e: ast.AST, names: set[str], program_id: bool) -> bool:
    """Whether ``e`` reads one of ``names`` (or, with ``program_id``, calls ``tl.program_id``) outside a conversion
    to int64."""
    if _to_int64(src, e):
        return False
    if isinstance(e, ast.Name) and e.id in names:
        return True
    if program_id and isinstance(e, ast.Call) and src.resolve(dotted(e.func)) == _PROGRAM_ID:
        return True
    if isinstance(e, ast.Call) and _memory(src, e):
        return False  # a value read from memory, not an index
    return any(_reads(src, c, names, program_id) for c in ast.iter_child_nodes(e))


def _assignments(fn: ast.FunctionDef) -> list[tuple[int, set[str], ast.AST]]:
    """Each binding in ``fn``, in the order of the source: ``(its line, the names it binds, the expression they
    get)`` (a ``for`` target gets its iterable)."""
    out = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            out.append((n.lineno, {m.id for t in n.targets for m in ast.walk(t) if isinstance(m, ast.Name)}, n.value))
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            out.append((n.lineno, {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}, n.value))
        elif isinstance(n, ast.NamedExpr):
            out.append((n.lineno, {n.target.id}, n.value))
        elif isinstance(n, ast.For):
            out.append((n.lineno, {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}, n.iter))
    return sorted(out, key=lambda b: b[0])


def _state(src, bindings, names: set[str], program_id: bool, line: int) -> set[str]:
    """``names`` and the names that, read at ``line``, hold a value reading them: the bindings above ``line`` taken
    in the source's order, each rebinding deciding anew (``row = row.to(tl.int64)`` drops ``row``)."""
    names = set(names)
    for at, targets, value in bindings:
        if at >= line:
            break
        names = (names | targets) if _reads(src, value, names, program_id) else (names - targets)
    return names


def offset_problem(src, fn: ast.FunctionDef, program_params: frozenset = frozenset(), depth: int = 0) -> str | None:
    """Why ``fn``, a ``@triton.jit`` function of the learner's source ``src`` (as
    :mod:`~fastpath_lib.grading.rules.kernel_source` reads it), computes an offset that wraps past 2**31 elements:
    the first product of a value derived from ``tl.program_id`` in int32 and a value known only at run time, in
    ``fn`` or in a ``@triton.jit`` function of the source it passes such a value to (``program_params``: the
    parameters given one)."""
    a = fn.args
    params = [x for x in a.posonlyargs + a.args + a.kwonlyargs]
    runtime_params = {x.arg for x in params if x.annotation is None
                      or src.resolve(dotted(x.annotation)) != "triton.language.constexpr"}
    bindings = _assignments(fn)
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in src.kernels and depth < 8:
            program = _state(src, bindings, set(program_params), True, n.lineno)
            callee = src.kernels[n.func.id]
            names = [x.arg for x in callee.args.posonlyargs + callee.args.args]
            given = {names[i] for i, v in enumerate(n.args) if i < len(names) and _reads(src, v, program, True)}
            given |= {k.arg for k in n.keywords if k.arg and _reads(src, k.value, program, True)}
            problem = given and offset_problem(src, callee, frozenset(given), depth + 1)
            if problem:
                return problem
        if not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)
                or isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Mult)):
            continue
        left, right = (n.left, n.right) if isinstance(n, ast.BinOp) else (n.target, n.value)
        program = _state(src, bindings, set(program_params), True, n.lineno)  # int32 program ids and their products
        runtime = _state(src, bindings, runtime_params, False, n.lineno) | program
        for pid, other in ((left, right), (right, left)):
            if _reads(src, pid, program, True) and _reads(src, other, runtime, True):
                text = ast.unparse(n)[:80]
                return (f"row offsets wrap in int32: your kernel {fn.name} computes {text} in int32 "
                        f"({ast.unparse(pid)[:40]} comes from tl.program_id, {ast.unparse(other)[:40]} is known only "
                        f"at run time); past 2**31 elements (a large KV cache, a long prefill) the product wraps, "
                        f"whatever the grid and the guards: convert the program id to int64 first "
                        f"(tl.program_id(0).to(tl.int64))")
    return None
