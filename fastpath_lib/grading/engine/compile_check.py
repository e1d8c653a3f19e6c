"""The grader's compile step: the learner's kernels, compiled by Triton's own frontend for a GPU, with no GPU.

Step 2 of :mod:`fastpath_lib.grading.engine.kernel_run`: every kernel the record launches is compiled for a GPU target
(sm_80) with the argument types of its launches and the values the replay passes
(:func:`~fastpath_lib.grading.engine.replay.bound`), in a forked process of its own (:func:`compiled_apart`). A kernel
body that escapes to Python (an ``import``, a call of anything but Triton's language, reached by any name:
:func:`callee_problem`) does not compile and fails the part; the frontend's visits of each of the program's functions
come back too (:func:`~fastpath_lib.grading.engine.replay.compiled_only` keeps only those in the replay).
"""

from __future__ import annotations

import contextlib
import functools
import os

from fastpath_lib.grading.engine import replay

__all__ = ["GPU_TARGET", "NotTriton", "callee_problem", "compiled_apart", "exec_program", "kernel_builtins"]

#: The compute capability the frontend compiles for (the predicate's oldest admitted architecture).
GPU_TARGET = 80

#: Builtins Triton's frontend provides a kernel that reach attributes by name or build Python objects: none is
#: Triton's language (:func:`kernel_builtins`).
_PYTHON_OBJECT_BUILTINS = ("getattr", "hasattr", "list")


@functools.cache
def kernel_builtins() -> frozenset[str]:
    """The Python builtins a kernel body may call: those Triton's frontend provides a kernel
    (``CodeGenerator.builtin_namespace``; not ``bool``, which it lacks) less ``getattr``, ``hasattr`` and ``list``,
    which the frontend provides too: ``range``, ``min``, ``max``, ``len``, ``int``, ``float``, ``isinstance``,
    ``print``. The compile step
    (:func:`callee_problem`) and the source rule
    (:func:`~fastpath_lib.grading.rules.kernel_body.body_problem`) read the same set."""
    from triton.compiler.code_generator import CodeGenerator

    return frozenset(CodeGenerator.builtin_namespace) - set(_PYTHON_OBJECT_BUILTINS)




def _signature(fn, described: dict):
    """``fn``'s signature and constexpr values for Triton's frontend, from its launch's arguments as
    :func:`~fastpath_lib.grading.engine.replay.describe` described them: each constexpr is the value the replay
    passes (:func:`~fastpath_lib.grading.engine.replay.bound`), a parameter left out its default."""
    sig, const = {}, {}
    for i, p in enumerate(fn.params):
        kind, value = described.get(p.name, ["value", p.default if p.has_default else None])
        value = replay.bound([kind, value])
        if p.is_constexpr:
            sig[p.name], const[(i,)] = "constexpr", value
        elif kind == "tensor":
            sig[p.name] = value
        elif kind == "int":
            sig[p.name] = "i32" if -2 ** 31 <= value < 2 ** 31 else "i64"
        elif kind == "float":
            sig[p.name] = "fp32"
        elif kind == "bool":
            sig[p.name] = "i1"
        elif p.name in described and value is not None:  # a dtype or a string: refused
            raise TypeError(f"the parameter {p.name} is not a tl.constexpr and takes a {value!r}: a runtime "
                            f"parameter takes a tensor or a number; annotate it tl.constexpr")
        else:
            sig[p.name], const[(i,)] = "constexpr", value
    return sig, const


def callee_problem(fn) -> str | None:
    """Why ``fn``, a function a kernel body calls (the object Triton's frontend resolved the call to), is not
    Triton's language; ``None`` where it is: a ``@triton.jit`` function, a function ``triton.language`` marks as a
    builtin (``tl.load``, ``tl.sum``, a tensor's ``.to``), a constexpr function or a class of ``triton.language``
    (``tl.constexpr``), a method of one of its types on a value (``X.dtype.element_ty.is_fp16()``), or one of the
    Python builtins the frontend itself provides a kernel that :func:`kernel_builtins` keeps (``range``, ``min``,
    ``max``, ``len``, ``int``, ``float``, ``isinstance``, ``print``; the frontend also provides ``getattr``,
    ``hasattr`` and ``list``, which reach attributes by name or build Python objects, and the grader refuses them).
    Triton's own functions (``tl.max``, ``tl.rand``) call nothing else."""
    from triton.compiler.code_generator import BoundJITMethod, CodeGenerator
    from triton.language import core
    from triton.runtime.jit import BoundConstexprFunction, ConstexprFunction, JITFunction

    target = fn.__func__ if isinstance(fn, (BoundJITMethod, BoundConstexprFunction)) else fn
    if isinstance(target, JITFunction) or getattr(fn, core.TRITON_BUILTIN, False) is True:
        return None
    if isinstance(target, ConstexprFunction) and getattr(target.fn, "__module__", "").startswith("triton.language"):
        return None
    if isinstance(fn, type) and fn.__module__.startswith("triton.language"):  # tl.constexpr(4), tl.static_range(2)
        return None
    if isinstance(getattr(fn, "__self__", None), (core.base_type, core.base_value)) and getattr(
            getattr(fn, "__func__", None), "__module__", "").startswith("triton.language"):  # X.dtype.is_fp16()
        return None
    if any(fn is CodeGenerator.builtin_namespace[name] for name in kernel_builtins()):
        return None
    where = getattr(fn, "__module__", None) or type(fn).__module__
    what = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{where}.{what}, a Python {'function' if callable(fn) else 'object'}, not Triton's"


class NotTriton(Exception):
    """A kernel body's call of something that is not Triton's language (:func:`callee_problem`), met by Triton's
    frontend: ``why`` says which call, where."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@contextlib.contextmanager
def _only_triton_calls():
    """Triton's frontend, meanwhile, refuses each call of a kernel body (a call, or the context manager a ``with``
    makes) whose callee is not Triton's language (:func:`callee_problem`), before making it: the frontend itself
    calls any plain Python function it meets. The calls of Triton's own functions (``tl.max``) are read too. An
    operator (``a + b``, ``a == b``, ``a[i]``) is the operands' own method, as in any Python."""
    import ast

    from triton.compiler import code_generator

    gen = code_generator.CodeGenerator
    call_function, visit_with = gen.call_Function, gen.visit_With

    def refuse(self, node, fn) -> None:
        problem = callee_problem(fn)
        if problem is not None:
            name = self.jit_fn.__name__
            raise NotTriton(f"your kernel {name} calls {ast.unparse(node.func)}(...) (line {node.lineno} of {name}, "
                            f"its def the first): that is {problem}; a kernel body calls only triton.language's "
                            f"functions and your @triton.jit functions")

    def checked_call(self, node, fn, args, kws):
        if isinstance(node, ast.Call):
            refuse(self, node, fn)
        return call_function(self, node, fn, args, kws)

    def checked_with(self, node):
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call):
                raise NotTriton(f"your kernel {self.jit_fn.__name__} enters {ast.unparse(call)} (line {call.lineno}): "
                                f"a kernel body's with statement enters what a triton.language call makes")
            refuse(self, call, code_generator._unwrap_if_constexpr(self.visit(call.func)))
        return visit_with(self, node)
    gen.call_Function, gen.visit_With = checked_call, checked_with
    try:
        yield
    finally:
        gen.call_Function, gen.visit_With = call_function, visit_with


#: The ``__name__`` of the namespace the program's text runs in (:func:`exec_program`): its functions' ``__module__``.
_LEARNER = "__fastpath_learner__"


@contextlib.contextmanager
def _visits(into: dict):
    """Triton's frontend, meanwhile, adds to ``into[name]`` the path (:func:`~fastpath_lib.grading.engine.replay.
    node_paths`) of each node of the program's function ``name`` it visits: what it compiled. What it never visits
    (the ``else:`` of a loop it unrolls to nothing, a branch a constexpr decides, a comprehension's ``if``) compiles
    to nothing, and the replay runs none of it (:func:`~fastpath_lib.grading.engine.replay.compiled_only`). The
    message of a ``tl.static_assert`` that holds, which the frontend never evaluates, is added as
    :data:`~fastpath_lib.grading.engine.replay.MESSAGE` and its path: the replay passes its text instead."""
    import ast

    from triton.compiler import code_generator

    gen = code_generator.CodeGenerator
    visit, table = gen.visit, gen.statically_implemented_functions
    kept = dict(table)

    def visiting(self, node):
        if isinstance(node, ast.FunctionDef) and not hasattr(self, "_fastpath_paths"):
            mine = getattr(getattr(self.jit_fn, "fn", None), "__module__", None) == _LEARNER
            self._fastpath_paths = (replay.node_paths(node), into.setdefault(self.jit_fn.__name__, set()), node) \
                if mine else None
        paths = getattr(self, "_fastpath_paths", None)
        if paths is not None and id(node) in paths[0]:
            paths[1].add(paths[0][id(node)])
        return visit(self, node)

    def held(self, node):  # tl.static_assert: raises where it fails
        out = gen.execute_static_assert(self, node)
        paths = getattr(self, "_fastpath_paths", None)
        if paths is not None and len(node.args) == 2 and id(node.args[1]) in paths[0]:
            paths[1].add(replay.MESSAGE + paths[0][id(node.args[1])])
        return out
    gen.visit = visiting
    table.update({fn: held for fn, how in kept.items() if how is gen.execute_static_assert})
    try:
        yield
    finally:
        gen.visit = visit
        table.clear()
        table.update(kept)


def _frontend(fn, sig: dict, const: dict, visited: dict | None = None) -> None:
    """Triton's frontend (the code generator) for ``fn`` on a CUDA target: the step that refuses Python escapes
    (:func:`_only_triton_calls`)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", GPU_TARGET, 32)
    backend = make_backend(target)
    src = ASTSource(fn, sig, const)
    options = backend.parse_options(dict(src.parse_options()))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    with _only_triton_calls(), _visits({} if visited is None else visited):
        src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)


def exec_program(text: str, where: str) -> dict:
    """The program's namespace: its text written to ``where`` first (Triton reads a kernel's source from its file)."""
    with open(where, "w", encoding="utf-8") as fh:
        fh.write(text)
    ns: dict = {"__name__": _LEARNER, "__file__": where}
    exec(compile(text, where, "exec"), ns)  # noqa: S102 - the learner's kernels and launcher, under the static rules
    return ns


def _compile_problem(text: str, seen: list, where: str, visited: dict | None = None) -> str | None:
    """Why a kernel the record launches does not compile for a GPU (``None`` when all do); ``visited`` (name -> set)
    takes the nodes the frontend visited in each of the program's functions (:func:`_visits`)."""
    os.environ["TRITON_INTERPRET"] = "0"  # read at each triton.jit: the kernels below are JITFunctions
    # this process holds no value: the record's text runs whole, as Triton's errors name it
    ns = exec_program(text, where)
    done = set()
    for name, described in seen:
        key = (name, repr(sorted(described.items())))
        if key in done:
            continue
        done.add(key)
        try:
            _frontend(ns[name], *_signature(ns[name], described), visited)
        except Exception as exc:  # noqa: BLE001 - Triton's own words are the feedback
            cause = exc
            while cause is not None and not isinstance(cause, NotTriton):
                cause = cause.__cause__ or cause.__context__
            if cause is not None:
                return f"{cause.why} (Triton's frontend, sm_{GPU_TARGET})"
            lines = [s for s in str(exc).strip().splitlines() if s.strip()]
            why = next((s for s in reversed(lines) if "Error" in s or "unsupported" in s.lower()), lines[-1] if lines
                       else type(exc).__name__)
            return (f"your kernel {name} does not compile for a GPU (Triton's frontend, sm_{GPU_TARGET}): "
                    f"{why.strip()[:300]}; a kernel body is pure Triton: triton.language, its parameters, its own "
                    f"variables and your other @triton.jit functions")
    return None


def compiled_apart(text: str, seen: list, where: str) -> tuple[str | None, dict]:
    """:func:`_compile_problem` in a forked process of its own, which hands back only its answer (a sentence or
    ``None``, and the nodes the frontend visited in each of the program's functions, as JSON through a pipe)."""
    import json

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the compile step
        os.close(read_end)
        try:
            visited: dict = {}
            try:
                problem = _compile_problem(text, seen, where, visited)
            except Exception as exc:  # noqa: BLE001
                problem = f"the grader could not compile your kernels ({type(exc).__name__}: {str(exc)[:200]})"
            with os.fdopen(write_end, "w", encoding="utf-8") as fh:
                fh.write(json.dumps({"problem": problem, "visited": {k: sorted(v) for k, v in visited.items()}}))
        finally:
            os._exit(0)  # no atexit, no teardown
    os.close(write_end)
    with os.fdopen(read_end, "r", encoding="utf-8") as fh:
        said = fh.read(64 * 1024 * 1024)
    _, status = os.waitpid(pid, 0)
    try:
        answer = json.loads(said)
        problem, visited = answer["problem"], answer["visited"]
        if not (problem is None or isinstance(problem, str)) or type(visited) is not dict:
            raise ValueError(answer)
    except (ValueError, TypeError, KeyError):
        return (f"the grader could not compile your kernels (the compile step ended without an answer, wait status "
                f"{status})"), {}
    return problem, visited
