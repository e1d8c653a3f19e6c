"""The learner's Triton kernel, run by the grader as data: facts about it are measured, never reported by the kernel.

The learner's notebook kernel answers only return values. What a check needs to know about the learner's Triton
kernel itself (that it is pure Triton, which kernels a launcher launches, how often, what each reads and writes) the
grader measures on the kernel's *source*, as read from the notebook file
(:func:`fastpath_lib.grading.rules.kernel_source.program`: the learner's ``@triton.jit`` functions, and for a launcher
the host functions it reaches, under the static rules of :mod:`~fastpath_lib.grading.rules.kernel_source`), in a fresh
process of its own (``python -m fastpath_lib.grading.engine.kernel_run``):

1. the program runs under Triton's interpreter on the grader's inputs (CPU copies), each call inside
   :func:`fastpath_lib.traffic.watch`: per launch and tensor argument the distinct and requested bytes, and every
   out-of-bounds access (dropped, so a wrong kernel corrupts nothing), with its program id, offsets and mask. In that
   process torch only allocates, views, copies and reads shapes (:mod:`~fastpath_lib.grading.engine.host_ops`,
   installed after the grader's imports and before the program's text runs): every other operator refuses at the
   dispatcher, so the computation is the kernel's;
2. every kernel launched is compiled by Triton's own frontend for a GPU target (sm_80), with the argument types of
   its launches, and no GPU: a kernel body that escapes to Python (an ``import``, a call to a plain Python function)
   does not compile ("unsupported AST node type: Import", "Cannot access global variable ...") and fails the part.
   The program's text runs again for this step, with torch's operators (the absent ones aside), in a forked process
   of its own that hands back only its answer: the process that holds the run's results runs none of it.

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
import subprocess
import sys
import tempfile
from collections.abc import Callable

import torch

__all__ = ["Outcome", "Call", "run", "sandboxed", "lacking", "launch_traffic", "copy_back", "torch_ops", "GPU_TARGET"]

#: The compute capability the frontend compiles for (the predicate's oldest admitted architecture).
GPU_TARGET = 80
_TRITON_TYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
                 torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
                 torch.bool: "i1"}


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
    :func:`~fastpath_lib.grading.rules.kernel_source.program`) in a fresh process under the interpreter, then compile
    every kernel it launched for a GPU target.

    Args:
        calls: ``(grid, args, kwargs)``; ``grid`` ``None`` calls ``entry(*args, **kwargs)`` (a launcher), a tuple
            launches it (``entry[grid](*args, **kwargs)``). Tensors travel as CPU copies. A fourth item names
            another function of ``text`` that call enters instead of ``entry``.
        allow: torch operators (``aten`` names) the exercise asks the launcher to run beyond allocating, viewing
            and copying (:mod:`~fastpath_lib.grading.engine.host_ops`): every other one raises there.
    """
    cpu = [(grid, [_cpu(a) for a in args], {k: _cpu(v) for k, v in kwargs.items()}, *(rest[:1] or [entry]))
           for grid, args, kwargs, *rest in calls]
    with tempfile.TemporaryDirectory(prefix="fastpath-kernel-") as tmp:
        got = _in_child(tmp, "run", {"text": text, "entry": entry, "calls": cpu, "absent": _ABSENT.get(),
                                     "allow": list(allow)}, timeout)
        if isinstance(got, str):
            return Outcome([], got)
    problem = got.get("compile_problem")
    return Outcome([Call(**c) for c in got["calls"]], problem)


def _in_child(tmp: str, mode: str, request: dict, timeout: float):
    """The child's answer (a dict of plain data), or a sentence saying why there is none."""
    req, res = os.path.join(tmp, f"{mode}-request.pt"), os.path.join(tmp, f"{mode}-result.pt")
    torch.save(request, req)
    kit_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.pathsep.join(
        [kit_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    cmd = [sys.executable, "-m", "fastpath_lib.grading.engine.kernel_run", mode, req, res]
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

def _describe(v):
    """A launch argument as the compile step needs it: a tensor's Triton pointer type, else its value."""
    if isinstance(v, torch.Tensor):
        return ["tensor", "*" + _TRITON_TYPES.get(v.dtype, "fp32")]
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", v]
    if isinstance(v, float):
        return ["float", v]
    return ["value", v if v is None or isinstance(v, str) else repr(v)]


class _Recorded:
    """A kernel of the program, launched through ``kernel[grid](...)``: each launch's arguments are recorded."""

    def __init__(self, kernel, name: str, seen: list):
        self._kernel, self._name, self._seen = kernel, name, seen

    def __getitem__(self, grid):
        launch = self._kernel[grid]

        def record(*args, **kwargs):
            names = list(self._kernel.arg_names)
            bound = dict(zip(names, args)) | kwargs
            self._seen.append([self._name, {k: _describe(v) for k, v in bound.items()}])
            return launch(*args, **kwargs)
        return record

    def __call__(self, *args, **kwargs):  # a jit function called from another one
        return self._kernel(*args, **kwargs)


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
    sig, const = {}, {}
    for i, p in enumerate(fn.params):
        kind, value = described.get(p.name, ["value", p.default if p.has_default else None])
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
        else:
            sig[p.name], const[(i,)] = "constexpr", value
    return sig, const


def _frontend(fn, sig: dict, const: dict) -> None:
    """Triton's frontend (the code generator) for ``fn`` on a CUDA target: the step that refuses Python escapes."""
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
    src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context)


def _exec(text: str, where: str) -> dict:
    """The program's namespace: its text written to ``where`` first (Triton reads a kernel's source from its file)."""
    with open(where, "w", encoding="utf-8") as fh:
        fh.write(text)
    ns: dict = {"__name__": "__fastpath_learner__", "__file__": where}
    exec(compile(text, where, "exec"), ns)  # noqa: S102 - the learner's kernels and launcher, under the static rules
    return ns


def _compile_problem(text: str, seen: list, where: str) -> str | None:
    os.environ["TRITON_INTERPRET"] = "0"  # read at each triton.jit: the kernels below are JITFunctions
    ns = _exec(text, where)
    done = set()
    for name, described in seen:
        key = (name, repr(sorted(described.items())))
        if key in done:
            continue
        done.add(key)
        try:
            _frontend(ns[name], *_signature(ns[name], described))
        except Exception as exc:  # noqa: BLE001 - Triton's own words are the feedback
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


def _child(request: str, result: str) -> None:
    """One process for both steps, torch imported once: a forked copy imports Triton with the interpreter on and
    runs the calls (the interpreter's patches of ``triton.language`` stay in that copy), then, once it has ended,
    another forked copy imports Triton with it off and compiles every kernel the run launched. This process, which
    holds the run's results, runs none of the program's text."""
    req = torch.load(request, weights_only=True)
    if req.get("absent"):  # before the learner's program: in the run and in the compile step alike
        from fastpath_lib.grading.engine import absent

        absent.install(req["absent"])
    ran = result + ".run"
    pid = os.fork()
    if pid == 0:  # the interpreted run
        code = 1
        try:
            os.environ["TRITON_INTERPRET"] = "1"  # read at each triton.jit: the kernels become InterpretedFunctions
            _run_child(req, ran)
            code = 0
        finally:
            os._exit(code)  # no atexit, no teardown of what the parent still uses
    _, status = os.waitpid(pid, 0)
    if not os.path.exists(ran):
        raise SystemExit(f"the interpreted run ended without an answer (wait status {status})")
    with open(ran, "rb") as fh:
        got = torch.load(io.BytesIO(fh.read()), weights_only=True)
    where = os.path.join(os.path.dirname(os.path.abspath(result)), "your_notebook_compiled.py")
    got["compile_problem"] = _compiled_apart(req["text"], got.get("seen", []), where)
    _save(got, result)


def _compiled_apart(text: str, seen: list, where: str) -> str | None:
    """:func:`_compile_problem` in a forked process of its own, which hands back only its answer (a sentence or
    ``None``, as JSON through a pipe): the program's text runs there, never in the process that holds the run's
    results."""
    import json

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the compile step
        os.close(read_end)
        try:
            try:
                problem = _compile_problem(text, seen, where)
            except Exception as exc:  # noqa: BLE001
                problem = f"the grader could not compile your kernels ({type(exc).__name__}: {str(exc)[:200]})"
            with os.fdopen(write_end, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(problem))
        finally:
            os._exit(0)  # no atexit, no teardown
    os.close(write_end)
    with os.fdopen(read_end, "r", encoding="utf-8") as fh:
        said = fh.read(64 * 1024)
    _, status = os.waitpid(pid, 0)
    try:
        problem = json.loads(said)
    except ValueError:
        problem = 0
    if problem is None or isinstance(problem, str):
        return problem
    return f"the grader could not compile your kernels (the compile step ended without an answer, wait status {status})"


def _run_child(req: dict, result: str) -> None:
    from triton.runtime.interpreter import InterpretedFunction

    from fastpath_lib import traffic
    from fastpath_lib.grading.engine import host_ops

    # after the grader's imports, before any of the learner's program (its module-level code included)
    host_ops.install(req.get("allow", ()), guarded=bool(req.get("absent")))
    where = os.path.join(os.path.dirname(os.path.abspath(result)), "your_notebook.py")
    try:
        ns, failed = _exec(req["text"], where), None
    except Exception as exc:  # noqa: BLE001 - the program's own top-level code raised: every call's answer
        ns, failed = {}, exc
    seen: list = []
    for name in [k for k, v in ns.items() if isinstance(v, InterpretedFunction)]:
        ns[name] = _Recorded(ns[name], name, seen)
    calls = []
    for grid, args, kwargs, *entry in req["calls"]:
        call: dict = {"args": args}
        before = len(seen)
        try:
            if failed is not None:
                raise failed
            with traffic.watch() as t:
                target = ns[entry[0] if entry else req["entry"]]
                call["out"] = target[tuple(grid)](*args, **kwargs) if grid is not None else target(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the learner's exception is an answer
            call["error"] = (type(exc).__name__, str(exc).strip()[:500])
            t = None
        if t is not None:
            call["traffic"] = [launch_traffic(launch) for launch in t.launches]
            call["oob"] = [str(o) for o in t.oob]
            call["oob_accesses"] = int(t.oob_accesses)
        call["launches"] = [name for name, _ in seen[before:]]
        calls.append(call)
    _save({"calls": calls, "seen": seen}, result)


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
    _child(sys.argv[2], sys.argv[3])
