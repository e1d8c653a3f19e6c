"""Where Triton's interpreter, not the learner's kernel, fails in the grader's replay
(:mod:`~fastpath_lib.grading.engine.kernel_run`'s step 3): :func:`interpreter_gap` words it (:data:`INTERPRETER_GAP`),
with what to write instead where the kernel calls a function of a module the interpreter does not run
(:func:`interpreted_modules`, read from the interpreter's own patching).
"""

from __future__ import annotations

__all__ = ["INTERPRETER_GAP", "interpreter_gap", "interpreted_modules"]

#: What the replay answers where Triton's interpreter cannot run a kernel the compile step compiled for a GPU
#: (:func:`interpreter_gap`); ``{instead}`` says what the interpreter runs in its place.
INTERPRETER_GAP = ("the grader could not run your kernel under Triton's interpreter: line {line} of {name} (its def "
                   "the first), `{code}`, raised {error} inside Triton's own code, not yours, though Triton's GPU "
                   "compiler compiled it; so its values cannot be checked. {instead}")


def interpreted_modules() -> set[str]:
    """The modules whose functions Triton's interpreter runs: those it replaces the functions of when a kernel that
    sees ``triton.language`` starts (read from the interpreter's own patching, undone at once). A function of another
    module of Triton's language (``triton.language.extra.libdevice``'s) is a stub the GPU compiler replaces and the
    interpreter does not. Empty where this Triton patches otherwise."""
    import types

    import triton.language as tl

    try:
        from triton.runtime import interpreter

        scope = interpreter._patch_lang(types.FunctionType((lambda: None).__code__, {"tl": tl}))
    except Exception:  # noqa: BLE001 - another Triton: no module is known to run
        return set()
    try:
        return {obj.__name__ for obj, *_ in getattr(scope, "_changes", ()) if isinstance(obj, types.ModuleType)}
    finally:
        scope.restore()


def _instead(fn, ns: dict) -> str:
    """What to write instead of the calls in the kernel ``fn`` (an ``ast.FunctionDef``; ``None``: unknown) that reach
    a function of Triton's language through a module the interpreter does not run (:func:`interpreted_modules`), or
    a general sentence."""
    import ast
    import sys
    import types

    runs = interpreted_modules()
    said = []
    for node in ast.walk(fn) if fn is not None and runs else ():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        chain, value = [], node.func.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        holder = ns.get(value.id) if isinstance(value, ast.Name) else None
        for attr in reversed(chain):
            holder = getattr(holder, attr, None)
        if not (isinstance(holder, types.ModuleType) and holder.__name__.startswith("triton.language.")
                and holder.__name__ not in runs):
            continue
        name = node.func.attr
        same = next(("tl." + m.removeprefix("triton.language").lstrip(".") + ("." if m != "triton.language" else "")
                     + name for m in sorted(runs) if callable(getattr(sys.modules.get(m), name, None))), None)
        said.append(f"{ast.unparse(node.func)} (line {node.lineno - fn.lineno + 1}) is a function of "
                    f"{holder.__name__}, which the interpreter does not run: the GPU compiler supplies it, the "
                    f"interpreter runs {', '.join(sorted(runs))} and a tensor's methods"
                    + (f"; use {same}" if same else ""))
    if said:
        return "; ".join(dict.fromkeys(said)) + "."
    return ("Write that line with triton.language's own operations on the types it takes there, which the interpreter "
            "runs.")


def interpreter_gap(exc: BaseException, where: str, ns: dict) -> str | None:
    """:data:`INTERPRETER_GAP` where ``exc``, raised while the replay ran a kernel, is Triton's interpreter failing on
    a line of the learner's kernel (the kernels' file ``where``, namespace ``ns``) inside Triton's own code: an
    operation the interpreter does not run (a ``libdevice`` function, a stub there that returns nothing,
    ``tl.inline_asm_elementwise``, an atomic of a type it lacks). The compile step compiled the kernel, with the same
    argument types, before the replay ran it, so what Triton rejects in a kernel was rejected there. ``None`` for
    anything else: an exception raised by the kernel's own line (code the compile step never compiled), a failing
    ``tl.device_assert`` (the kernel's own verdict: an ``AssertionError``), an error the interpreter did not wrap."""
    import ast
    import os
    import traceback

    from triton.runtime.errors import InterpreterError

    if not isinstance(exc, InterpreterError):
        return None
    cause, frames = exc, []  # the interpreter wraps again at each jit function called (tl.sum's combine): unwrap all
    while isinstance(cause, InterpreterError) and cause.__cause__ is not None:
        cause = cause.__cause__
        frames += traceback.extract_tb(cause.__traceback__)  # each wrap's frames: the stack, outermost first
    if cause is exc or isinstance(cause, (AssertionError, InterpreterError)):
        return None
    mine = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(where)]
    if not mine or frames[-1] is mine[-1]:
        return None
    frame = mine[-1]
    with open(where, encoding="utf-8") as fh:
        text = fh.read()
    fn = next((n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == frame.name
               and n.lineno <= frame.lineno <= (n.end_lineno or n.lineno)), None)
    line = frame.lineno - fn.lineno + 1 if fn is not None else frame.lineno
    code = (text.splitlines()[frame.lineno - 1] if frame.lineno <= len(text.splitlines()) else "").strip()
    return INTERPRETER_GAP.format(line=line, name=frame.name, code=code[:120],
                                  error=f"{type(cause).__name__}: {str(cause).strip()[:200]}", instead=_instead(fn, ns))
