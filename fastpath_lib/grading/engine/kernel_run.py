"""The learner's Triton kernel, run by the grader as data: facts about it are measured, never reported by the kernel.

The learner's notebook kernel answers only return values. What a check needs to know about the learner's Triton
kernel itself (that it is pure Triton, which kernels a launcher launches, how often, what each reads and writes) the
grader measures on the kernel's *source*, as read from the notebook file
(:func:`fastpath_lib.grading.rules.kernel_source.program`: the learner's ``@triton.jit`` functions, and for a launcher
the host functions it reaches, under the static rules of :mod:`~fastpath_lib.grading.rules.kernel_source`), in a fresh
process of its own (``python -m fastpath_lib.grading.engine.kernel_run``), in three steps, each in a forked copy of it
(:func:`_child`):

1. **record**: the program runs, and each call on tensors that hold no values (``device="meta"``, with the inputs'
   shapes, dtypes, strides and shared storages): what a launcher allocates, views and copies (the torch operators it
   runs) and each kernel it launches, with its grid and arguments, is recorded
   (:class:`~fastpath_lib.grading.engine.replay.Recorder`). A launcher that reads a value fails there, with
   :data:`~fastpath_lib.grading.engine.replay.VALUE_READ`. In that process torch only allocates, views, copies and reads
   shapes (:mod:`~fastpath_lib.grading.engine.host_ops`, installed after the grader's imports and before the
   program's text runs): every other operator refuses at the dispatcher, so the computation is the kernel's. The
   process holds no value of the inputs: the child read them into memory no fork gets, and removed their file;
2. **compile**: every kernel the record launches is compiled by Triton's own frontend for a GPU target (sm_80), with
   the argument types of its launches and the values the replay passes
   (:func:`~fastpath_lib.grading.engine.replay.bound`), and no GPU: a kernel body that escapes to Python (an
   ``import``, a call of anything but Triton's language, reached by any name: :func:`callee_problem`) does not
   compile ("unsupported AST node type: Import", "... calls tl.random.tl.builtins.eval(...) ...: that is
   builtins.eval, a Python function, not Triton's") and fails the part;
3. **replay**: on the real inputs (CPU copies), each record's operators and launches, and nothing else of the
   learner's: the process defines only the program's kernels. Each call runs inside :func:`fastpath_lib.traffic.watch`:
   per launch and tensor argument the distinct and requested bytes, and every out-of-bounds access (dropped, so a
   wrong kernel corrupts nothing), with its program id, offsets and mask. What the record says the launcher returned,
   built by the replay, is the call's answer; the arguments as the replay left them come back too.

The request is written by the grader and the answer read with ``torch.load(weights_only=True)``; the child's output
is judged like any answer. While the grader grades in its sandbox (:func:`sandboxed`), the child runs in the same
sandbox as the learner's notebook kernel (:func:`fastpath_lib.grading.engine.sandbox.command`: the machine's
libraries, the interpreter and the kit staged for the exercise, no checkout, no check or answer key, nobody without
capabilities), this module staged with the kit. For an exercise whose checks declare torch operators absent
(:func:`lacking`), the child installs :mod:`~fastpath_lib.grading.engine.absent` before the learner's program, as the
notebook's kernel does.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import io
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable

import torch

from fastpath_lib.grading.engine import replay

__all__ = ["Outcome", "Call", "NotTriton", "run", "sandboxed", "lacking", "launch_traffic", "copy_back", "torch_ops",
           "callee_problem", "GPU_TARGET"]

#: The compute capability the frontend compiles for (the predicate's oldest admitted architecture).
GPU_TARGET = 80



#: ``(folder, env) -> (command prefix, env)``: the sandbox the child runs in (:func:`sandboxed`); ``None``: none.
_SANDBOX: contextvars.ContextVar[Callable[[str, dict], tuple[list[str], dict]] | None] = contextvars.ContextVar(
    "fastpath_kernel_run_sandbox", default=None)


@contextlib.contextmanager
def sandboxed(sandbox: Callable[[str, dict], tuple[list[str], dict]]):
    """Start every child meanwhile under ``sandbox(folder, env)``: the command prefix and environment for a child
    whose files are in ``folder`` (the grader, while it grades in its sandbox:
    :func:`fastpath_lib.grading.engine.sandbox.for_children`)."""
    token = _SANDBOX.set(sandbox)
    try:
        yield
    finally:
        _SANDBOX.reset(token)


#: the spec of :func:`fastpath_lib.grading.engine.absent.install` the child installs first (``None``: none)
_ABSENT: contextvars.ContextVar[dict | None] = contextvars.ContextVar("fastpath_kernel_run_absent", default=None)


@contextlib.contextmanager
def lacking(spec: dict | None):
    """Start every child meanwhile with the torch operators ``spec`` names absent
    (:mod:`~fastpath_lib.grading.engine.absent`), installed before any of the learner's code runs, as in the
    notebook's kernel of the same exercise."""
    token = _ABSENT.set(spec)
    try:
        yield
    finally:
        _ABSENT.reset(token)


@dataclasses.dataclass
class Call:
    """One call the grader made: what it returned, the arguments as it left them, what it launched and touched."""

    out: object = None
    args: list = dataclasses.field(default_factory=list)
    error: tuple[str, str] | None = None
    launches: list[str] = dataclasses.field(default_factory=list)  # kernel names, in order
    #: per launch, argument name -> {"loaded_distinct", "stored_distinct", "loaded_requested", "stored_requested",
    #: "max_loads_per_byte", "max_stores_per_byte", "nbytes"}
    traffic: list[dict] = dataclasses.field(default_factory=list)
    oob: list[str] = dataclasses.field(default_factory=list)  # each out-of-bounds access, as the checker words it
    oob_accesses: int = 0


@dataclasses.dataclass
class Outcome:
    """The calls, in order, and why a kernel does not compile for a GPU (``None`` when all do)."""

    calls: list[Call]
    compile_problem: str | None = None


def run(text: str, entry: str, calls: list[tuple], *, allow: tuple[str, ...] = (), timeout: float = 120.0) -> Outcome:
    """Run ``calls`` of ``entry`` in ``text`` (a program built by
    :func:`~fastpath_lib.grading.rules.kernel_source.program`) in a fresh process: recorded on tensors that hold no
    values, every kernel the records launch compiled for a GPU target, and the records replayed on the inputs under
    the interpreter (see the module's docstring).

    Args:
        calls: ``(grid, args, kwargs)``; ``grid`` ``None`` calls ``entry(*args, **kwargs)`` (a launcher), a tuple
            launches it (``entry[grid](*args, **kwargs)``). Tensors travel as CPU copies. A fourth item names
            another function of ``text`` that call enters instead of ``entry``.
        allow: torch operators (``aten`` names) the exercise asks the launcher to run beyond allocating, viewing
            and copying (:mod:`~fastpath_lib.grading.engine.host_ops`): every other one raises there.
    """
    cpu = [(grid, [_cpu(a) for a in args], {k: _cpu(v) for k, v in kwargs.items()}, *(rest[:1] or [entry]))
           for grid, args, kwargs, *rest in calls]
    shapes = [(grid, *replay.shapes_only(args, kwargs), name) for grid, args, kwargs, name in cpu]
    with tempfile.TemporaryDirectory(prefix="fastpath-kernel-") as tmp:
        got = _in_child(tmp, {"text": text, "entry": entry, "calls": shapes, "absent": _ABSENT.get(),
                              "allow": list(allow)}, [(args, kwargs) for _, args, kwargs, _ in cpu], timeout)
        if isinstance(got, str):
            return Outcome([], got)
    problem = got.get("compile_problem")
    return Outcome([Call(**c) for c in got["calls"]], problem)


def _in_child(tmp: str, request: dict, values: list, timeout: float):
    """The child's answer (a dict of plain data), or a sentence saying why there is none. ``request`` describes the
    calls' tensors by shape (:func:`~fastpath_lib.grading.engine.replay.shapes_only`); ``values`` are the tensors, in
    a file of their own."""
    req, vals, res = (os.path.join(tmp, f"{n}.pt") for n in ("request", "values", "result"))
    torch.save(request, req)
    torch.save(values, vals)
    kit_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.pathsep.join(
        [kit_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    cmd = [sys.executable, "-m", "fastpath_lib.grading.engine.kernel_run", "run", req, res, vals]
    sandbox = _SANDBOX.get()
    if sandbox is not None:
        prefix, env = sandbox(tmp, env)
        cmd = prefix + cmd
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"your kernel ran past the grader's {timeout:.0f} s limit"
    try:
        with open(res, "rb") as fh:
            return torch.load(io.BytesIO(fh.read()), weights_only=True)
    except Exception:  # noqa: BLE001 - no answer, or one the grader does not read
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return f"the grader could not run your kernel ({tail[0][:200]})"


def copy_back(mine: list, theirs: list) -> None:
    """Each of the grader's tensors (``mine``) takes the contents the run left in its copy (``theirs``), whole
    storage (guard bands included), so the grader judges writes as if the kernel had run in its own process."""
    for a, b in zip(mine, theirs):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and \
                a.untyped_storage().nbytes() == b.untyped_storage().nbytes():
            with torch.no_grad():
                a.untyped_storage().copy_(b.untyped_storage())


def _cpu(v):
    if isinstance(v, torch.Tensor):  # whole storage, so writes outside the view come back too
        if v.device.type == "cpu":
            return v.detach()
        return torch.empty(0, dtype=v.dtype).set_(v.untyped_storage().cpu(), v.storage_offset(), v.size(),
                                                  v.stride())
    if type(v) in (list, tuple):
        return type(v)(_cpu(x) for x in v)
    return v


# --- the grader's child process ---------------------------------------------------------------------------------------

def torch_ops(ops: set):
    """A dispatch mode (a context manager) that adds the name of each torch operator run inside it to ``ops``
    (``aten.mul`` as ``"mul"``), as the notebook's own check sees a launcher run; the operators Triton's interpreter
    runs to launch a kernel (``copy_``, ``new_empty``, ``set_``) show too. The grader's child needs none: there an
    operator outside :mod:`~fastpath_lib.grading.engine.host_ops`'s allow-list raises."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))
    return _Ops()


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
    Python builtins the frontend itself provides a kernel (``range``, ``min``, ``max``, ``len``, ``int``, ``float``,
    ``isinstance``, ``print``; not ``getattr``, ``hasattr`` or ``list``, which reach attributes by name or build
    Python objects). Triton's own functions (``tl.max``, ``tl.rand``) call nothing else."""
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
    if any(fn is b for name, b in CodeGenerator.builtin_namespace.items()
           if name not in ("getattr", "hasattr", "list")):
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


#: The ``__name__`` of the namespace the program's text runs in (:func:`_exec`): its functions' ``__module__``.
_LEARNER = "__fastpath_learner__"


@contextlib.contextmanager
def _visits(into: dict):
    """Triton's frontend, meanwhile, adds to ``into[name]`` the path (:func:`~fastpath_lib.grading.engine.replay.
    node_paths`) of each node of the program's function ``name`` it visits: what it compiled. A statement it never
    visits (the ``else:`` of a loop it unrolls to nothing, a branch a constexpr decides) compiles to nothing, and the
    replay runs none (:func:`~fastpath_lib.grading.engine.replay.compiled_only`)."""
    import ast

    from triton.compiler import code_generator

    gen = code_generator.CodeGenerator
    visit = gen.visit

    def visiting(self, node):
        if isinstance(node, ast.FunctionDef) and not hasattr(self, "_fastpath_paths"):
            mine = getattr(getattr(self.jit_fn, "fn", None), "__module__", None) == _LEARNER
            self._fastpath_paths = (replay.node_paths(node), into.setdefault(self.jit_fn.__name__, set()), node) \
                if mine else None
        paths = getattr(self, "_fastpath_paths", None)
        if paths is not None and id(node) in paths[0]:
            paths[1].add(paths[0][id(node)])
        return visit(self, node)
    gen.visit = visiting
    try:
        yield
    finally:
        gen.visit = visit


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


def _exec(text: str, where: str) -> dict:
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
    ns = _exec(text, where)  # this process holds no value: the record's text runs whole, as Triton's errors name it
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


def launch_traffic(launch) -> dict:
    """One :class:`fastpath_lib.traffic.Launch` as plain data: argument name -> its byte counts (as in
    :attr:`Call.traffic`)."""
    keys = ("loaded_distinct", "stored_distinct", "loaded_requested", "stored_requested", "max_loads_per_byte",
            "max_stores_per_byte", "nbytes")
    return {name: {k: int(getattr(t, k, 0) or 0) for k in keys} for name, t in launch.tensors.items()}


def _load(path: str):
    with open(path, "rb") as fh:
        return torch.load(io.BytesIO(fh.read()), weights_only=True)


def _child(request: str, result: str, values: str) -> None:
    """Three steps, each in a forked copy of this process (torch imported once):

    1. **record**: the program's text runs, and each call on tensors that hold no values (the request describes
       them, :func:`~fastpath_lib.grading.engine.replay.shapes_only`): what the launcher runs and launches is recorded
       (:class:`~fastpath_lib.grading.engine.replay.Recorder`). This process holds no value then: the values file
       was read into memory no fork has, and removed; the record's process, and any it left, have ended before the
       values are read;
    2. **compile**: every kernel the record launches, by Triton's own frontend for a GPU (:func:`_compiled_apart`);
    3. **replay**: on the real inputs, the record's operators and launches, under Triton's interpreter and
       :func:`fastpath_lib.traffic.watch`; the program's host functions are not even defined there
       (:func:`~fastpath_lib.grading.engine.replay.definitions`).
    """
    replay.prctl(4, 0)  # PR_SET_DUMPABLE 0: no process of this user reads this one's memory or files (/proc/<pid>/mem)
    replay.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: what the record's process leaves is this one's to end
    req = torch.load(request, weights_only=True)
    if req.get("absent"):  # before the learner's program: in every step alike
        from fastpath_lib.grading.engine import absent

        absent.install(req["absent"])
    from fastpath_lib.grading.engine import host_ops

    # after the grader's imports, before any of the learner's program (its module-level code included): the record's
    # and the replay's processes inherit it
    host_ops.install(req.get("allow", ()), guarded=bool(req.get("absent")))
    held, size = replay.held_apart(values)
    work = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(result)))
    recorded = os.path.join(work, "record.pt")
    status = replay.forked(lambda: _record(req, recorded))
    replay.end_strays()
    records = []
    for i in range(len(req["calls"])):
        try:  # the record's process wrote it: read as an answer, never trusted
            record = _load(f"{recorded}.{i}")
        except Exception:  # noqa: BLE001
            record = None
        records.append(record if type(record) is dict else {"error": ["Refused", replay.VALUE_READ.format(
            why=f"the grader's process running it ended, wait status {status}")]})
    work = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(result)))  # nothing of the record's there
    seen = [[[s.get("launch"), s.get("described")] for s in r.get("steps", ()) if "launch" in s] for r in records]
    problem, visited = _compiled_apart(req["text"], [s for per_call in seen for s in per_call],
                                       os.path.join(work, "your_notebook_compiled.py"))
    if problem is None:  # the replay's program: what the compile step compiled, and nothing else of the kernels
        try:
            program = replay.definitions(req["text"], visited)
        except ValueError as exc:
            problem = str(exc)
    got: dict = {"calls": [{"error": ("CompileError", problem)} for _ in records], "seen": []}
    if problem is None:
        inputs = torch.load(io.BytesIO(held[:size]), weights_only=True)
        held.close()
        ran = os.path.join(work, "replay.pt")
        status = replay.forked(lambda: _replay(program, records, inputs, ran))
        if not os.path.exists(ran):
            raise SystemExit(f"the replay ended without an answer (wait status {status})")
        got = _load(ran)
        said = [re.search(r"your kernel runs code under the interpreter .*? for a GPU", str(c["error"][1]))
                for c in got["calls"] if c.get("error")]
        problem = next((m.group(0) for m in said if m), None)  # a launch ran what the compile step never compiled
        for call, mine, recorded in zip(got["calls"], got.pop("seen"), seen):  # a call that raised stopped early
            if mine != (recorded if call.get("error") is None else recorded[:len(mine)]):
                problem = "the grader's replay of your launcher launched other kernels than its record"
    got["compile_problem"] = problem
    with contextlib.suppress(OSError):
        os.unlink(result)
    _save(got, result)


def _compiled_apart(text: str, seen: list, where: str) -> tuple[str | None, dict]:
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


def _record(req: dict, path: str) -> None:
    """Step 1 of :func:`_child`: each call on tensors that hold no values, recorded, in a forked process of its own
    (a crash ends that call's record only); call ``i``'s record
    (:func:`~fastpath_lib.grading.engine.replay.recorded`) written to ``path.i``."""
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton's import: its kernels (and triton.language's) interpreted
    from triton.runtime.interpreter import InterpretedFunction

    with contextlib.suppress(OSError):
        os.close(0)
    current: list[replay.Recorder] = []

    def on_launch(name, kernel, grid, args, kwargs):
        current[-1].launch(name, kernel, grid, args, kwargs)
    try:
        ns, failed = _exec(req["text"], os.path.join(os.path.dirname(path), "your_notebook.py")), None
    except Exception as exc:  # noqa: BLE001 - the program's own top-level code raised: every call's answer
        ns, failed = {}, exc
    for name in [k for k, v in ns.items() if isinstance(v, InterpretedFunction)]:
        ns[name] = replay.Recorded(ns[name], name, on_launch)
    for i, (grid, args, kwargs, *entry) in enumerate(req["calls"]):
        def one(grid=grid, args=args, kwargs=kwargs, entry=entry, i=i):
            current[:] = [replay.Recorder()]
            if failed is not None:
                record = {"error": [type(failed).__name__, str(failed).strip()[:500]]}
            else:
                record = replay.recorded(current[0], ns[entry[0] if entry else req["entry"]], grid, args, kwargs)
            _save(record, f"{path}.{i}")
        status = replay.forked(one)
        if not os.path.exists(f"{path}.{i}"):
            _save({"error": ["Refused", replay.VALUE_READ.format(
                why=f"its process ended, wait status {status}: a read of memory through data_ptr(), which on a "
                    f"tensor with no values points near address zero")]}, f"{path}.{i}")


def _replay(program: str, records: list, inputs: list, path: str) -> None:
    """Step 3 of :func:`_child`: each record run on its call's real inputs, with the kernels of ``program``
    (:func:`~fastpath_lib.grading.engine.replay.definitions` with what the compile step visited);
    ``{"calls": [...], "seen": [...]}`` (per call, each launch's kernel and arguments as the compile step reads them)
    written to ``path``."""
    os.environ["TRITON_INTERPRET"] = "1"
    from triton.runtime.interpreter import InterpretedFunction

    from fastpath_lib import traffic

    seen: list = []

    def on_launch(name, kernel, grid, args, kwargs):
        bound = dict(zip(kernel.arg_names, args)) | kwargs
        seen.append([name, {k: replay.describe(v) for k, v in bound.items()}])
        return kernel[grid](*args, **kwargs)
    ns = _exec(program, os.path.join(os.path.dirname(path), "your_kernels.py"))
    kernels = {k: replay.Recorded(v, k, on_launch) for k, v in ns.items() if isinstance(v, InterpretedFunction)}
    ns.update(kernels)  # a kernel's calls of the others, by global name
    calls, by_call = [], []
    for record, (args, kwargs) in zip(records, inputs):
        call: dict = {"args": args}
        before = len(seen)
        t = None
        try:
            if "error" in record:
                raise replay.Refused(*record["error"][1:])
            again = replay.Replay(replay.leaves([args, kwargs], []), "cpu", kernels)
            with traffic.watch() as t:
                for step in record["steps"]:
                    again.step(step)
                call["out"] = again.decode(record["out"])
        except replay.Refused as exc:
            call["error"] = (str(record.get("error", ["Refused"])[0]), str(exc)[:1000])
        except Exception as exc:  # noqa: BLE001 - the learner's exception is an answer
            call["error"] = (type(exc).__name__, str(exc).strip()[:500])
            t = None
        if t is not None and "error" not in call:
            call["traffic"] = [launch_traffic(launch) for launch in t.launches]
            call["oob"] = [str(o) for o in t.oob]
            call["oob_accesses"] = int(t.oob_accesses)
        call["launches"] = [name for name, _ in seen[before:]]
        calls.append(call)
        by_call.append(seen[before:])
    _save({"calls": calls, "seen": by_call}, path)


def _save(answer: dict, result: str) -> None:
    buf = io.BytesIO()
    try:
        torch.save(answer, buf)
    except Exception as exc:  # noqa: BLE001 - a return value that is not plain data
        for c in answer.get("calls", []):
            c["out"] = None
            c.setdefault("error", ("TypeError", f"the grader reads tensors, numbers and tuples back: {exc}"))
        buf = io.BytesIO()
        torch.save(answer, buf)
    with open(result, "wb") as fh:
        fh.write(buf.getvalue())


if __name__ == "__main__":
    _child(*sys.argv[2:5])
