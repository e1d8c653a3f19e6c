"""The mutation engine of the exercises graded by broken code (04, 09, 12): a part per fault category, passed when
every mutant of the category is caught, with feedback that names categories with a survivor and never a mutant.

Exercise 04 runs its mutants on the learner's cases itself (:func:`category_result`); exercises 09 and 12 run the
learner's tests once per op, correct controls and broken ones, in an order drawn at grading time (:func:`run_order`;
in the grader the ops run in the grader's process: :func:`remote_outcomes`), and score them with
:func:`broken_op_results`. :func:`inspection` is the static rule both exercises share: tests inspect the op instead of
calling it.
"""

from __future__ import annotations

import random

from fastpath_lib.grading.engine import remote, sources
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.report.feedback import describe_error

__all__ = ["category_result", "run_order", "remote_outcomes", "first_errors", "broken_op_results", "inspection",
           "INSPECTS", "TENSOR_STATE", "inspecting_names", "inspection_stated"]


def category_result(exercise: str, part: str, survivors: str | None, caught: str) -> Result:
    """The part of one fault category: passed with ``caught`` when ``survivors`` is ``None``, else failed with
    ``survivors: ...`` (what the surviving mutants do and the kind of input or comparison that shows it, never which
    mutant)."""
    ok = survivors is None
    return Result(exercise, part, points_of(exercise, part), ok, caught if ok else f"survivors: {survivors}")


def run_order(runs: list[str]) -> list[str]:
    """``runs`` in an order drawn now (the kernel cannot predict which op a run faces)."""
    order = list(runs)
    random.SystemRandom().shuffle(order)
    return order


def remote_outcomes(tests, stub: str, servers: dict, runs: list[str]) -> dict[str, list]:
    """Run the learner's ``tests`` in their kernel once per entry of ``runs`` (variant names, in an order drawn now),
    each on a fresh stub ``stub`` whose calls ``servers[variant]()`` answers here; returns variant -> the errors of
    its runs (``None``: the tests passed)."""
    out: dict[str, list] = {}
    for variant in run_order(runs):
        out.setdefault(variant, []).append(remote.session(tests).run_tests(tests, stub, servers[variant]()))
    return out


def first_errors(outcomes: dict[str, list]):
    """``first(variant)`` over :func:`shuffled_outcomes`'s answer: the first error the tests raised on any run of the
    variant (``None``: they passed on every run), what :func:`broken_op_results` takes."""
    def first(variant):
        return next((e for e in outcomes.get(variant, [None]) if e is not None), None)
    return first


def broken_op_results(exercise: str, first, controls, broken: dict[str, int], what: dict[str, str],
                      passing: str) -> list[Result]:
    """The parts of tests graded by broken ops: ``passes_correct_ops``, then one per category of ``broken``
    (category -> how many broken ops, run as ``"category:i"``). ``first(variant)`` is the first error the tests
    raised on that variant (``None``: they passed); ``controls`` are ``(label, variant)`` of correct ops. No point
    while the tests fail a correct op, or while they pass on every op."""
    def result(name: str, ok: bool, text: str) -> Result:
        return Result(exercise, name, points_of(exercise, name), ok, text)

    alarms = []
    for label, variant in controls:
        exc = first(variant)
        if exc is not None and "not implemented" in describe_error(exc):
            raise exc
        if exc is not None:
            alarms.append(f"on {label}: {describe_error(exc)}")
    if alarms:
        why = "no credit while your tests fail on an op that keeps every promise (see passes_correct_ops): a test " \
              "that fails everything catches nothing"
        return [result("passes_correct_ops", False, "your tests fail on a correct op (one that keeps every promise)\n"
                       + "\n".join(alarms))] + [result(c, False, why) for c in broken]
    alive = {c: sum(first(f"{c}:{i}") is None for i in range(n)) for c, n in broken.items()}
    if all(alive[c] == n for c, n in broken.items()):
        why = "your tests pass on every op, broken ones included: they check nothing yet"
        return [result(n, False, why) for n in ("passes_correct_ops", *broken)]
    return [result("passes_correct_ops", True, passing)] + [
        category_result(exercise, c, what[c] if alive[c] else None, "caught every broken op of this category")
        for c in broken]


#: What a test that inspects the op instead of calling it reads (attributes, and names of modules or builtins).
_INSPECTING_ATTRS = frozenset({"__closure__", "__code__", "__globals__", "__wrapped__", "__self__", "__func__",
                               "__dict__", "__qualname__", "__module__", "cell_contents", "__defaults__",
                               "__kwdefaults__", "__reduce__", "__reduce_ex__", "__getstate__", "__slots__",
                               "__class__", "f_locals", "f_globals", "f_back", "co_code", "co_consts", "co_name"})
_INSPECTING_NAMES = frozenset({"inspect", "gc", "dis", "vars", "dir", "ctypes", "sys._getframe"})
#: Read off a bare name (``op.__name__``), the name an object was defined under, not what it returns.
_NAME_ATTR = "__name__"


def _tensor_state() -> frozenset[str]:
    import torch

    return frozenset(a for a, v in vars(torch._C.TensorBase).items()
                     if a.startswith("_") and not a.startswith("__") and not callable(v))


#: The private attributes torch keeps on every tensor of its state (its version counter ``_version``, the tensor it
#: views ``_base``, ...): reading them off a tensor the op was handed or returned tests what the op writes and
#: aliases (lesson 08 reads ``_version``), not the op. Derived from torch's tensor type: its data attributes, no
#: method.
TENSOR_STATE = _tensor_state()

#: The rule :func:`inspection` applies, in the words of the exercises that apply it (09 and 12; the refusal's
#: feedback ends with it, and ``tests/course/test_exercise_instructions.py`` finds it in their text).
INSPECTS = ("a contract test calls the op and checks what it returns, writes or raises; it does not inspect the op")


def inspecting_names() -> list[str]:
    """Every attribute and name :func:`inspection` refuses, as an exercise names them."""
    return sorted(_INSPECTING_ATTRS | _INSPECTING_NAMES | {_NAME_ATTR})


def inspection_stated() -> tuple[str, ...]:
    """What an exercise applying :func:`inspection` states: the rule (:data:`INSPECTS`), each name it refuses, and
    that a tensor's own state is allowed (``x._version``)."""
    return (INSPECTS, *(f"`{n}`" for n in inspecting_names()), "`x._version`")


def inspection(source: str) -> str | None:
    """What in ``source`` (the code a learner's tests reach) inspects an object instead of calling it, or ``None``.

    >>> inspection("def t(op):\\n    assert op.__name__ == 'rms_norm'")
    'op.__name__'
    >>> inspection("def t(op):\\n    print(type(op(1)).__name__)")

    A private attribute of an imported module is the library's, not the op's (test hygiene such as
    ``torch._dynamo.reset()`` reads nothing of the op), and ``id`` of what the op returned is a test of what it
    returns (each run of the grader hands the tests a fresh op, in an order drawn then: an identity tells nothing):

    >>> inspection("import torch\\ndef t(op):\\n    torch._dynamo.reset()\\n    assert id(op(x)) == id(x)")

    A tensor's own state (:data:`TENSOR_STATE`: ``x._version``, ``x._base``) is what the op wrote or aliased:

    >>> inspection("def t(op):\\n    v = x._version\\n    op(x)\\n    assert x._version > v")
    >>> inspection("def t(op):\\n    assert op._impl is None")
    'op._impl'
    """
    import ast

    for tree in filter(None, (sources.parse(source),)):
        modules = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                   for a in n.names}
        modules |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        for node in ast.walk(tree):
            library = (sources.dotted(node) or "").split(".")[0] in modules
            if isinstance(node, ast.Attribute) and (node.attr in _INSPECTING_ATTRS or (
                    node.attr.startswith("_") and not node.attr.startswith("__") and not library
                    and node.attr not in TENSOR_STATE) or (
                    node.attr == _NAME_ATTR and isinstance(node.value, ast.Name))):
                return f"{ast.unparse(node)}"
            if isinstance(node, (ast.Name, ast.Attribute)) and ast.unparse(node) in _INSPECTING_NAMES:
                return ast.unparse(node)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] + [node.module or ""] if isinstance(node, ast.ImportFrom) \
                    else [a.name for a in node.names]
                if any(m.split(".")[0] in _INSPECTING_NAMES for m in mods):
                    return f"import {', '.join(mods)}"
    return None
