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
   ``import``, a call of anything but Triton's language, reached by any name:
   :func:`~fastpath_lib.grading.engine.compile_check.callee_problem`) does not
   compile ("unsupported AST node type: Import", "... calls tl.random.tl.builtins.eval(...) ...: that is
   builtins.eval, a Python function, not Triton's") and fails the part;
3. **replay**: on the real inputs (CPU copies), each record's operators and launches, and nothing else of the
   learner's: the process defines only the program's kernels. Each call runs inside :func:`fastpath_lib.traffic.watch`:
   per launch and tensor argument the distinct and requested bytes, every out-of-bounds access (dropped, so a
   wrong kernel corrupts nothing), with its program id, offsets and mask, and every data race (a byte one program
   writes and another reads or writes, not both with atomics and not ordered by an atomic release and acquire:
   :class:`fastpath_lib.traffic.Race`). What the record says the launcher returned, built by the replay, is the
   call's answer; the arguments as the replay left them come back too. Where Triton's interpreter fails inside its
   own code on a kernel the compile step compiled, the part fails with a sentence saying so
   (:func:`~fastpath_lib.grading.engine.gaps.interpreter_gap`), not with the values.

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

from fastpath_lib.grading.engine import compile_check, forks, gaps, replay

__all__ = ["Outcome", "Call", "run", "sandboxed", "lacking", "launch_traffic", "copy_back", "torch_ops", "races",
           "RACE_RULE"]

#: What the checks that run a learner's kernel refuse as a data race (:class:`fastpath_lib.traffic.Race`), in the
#: exercises' words (each such exercise states it: ``STATED`` of its check module).
RACE_RULE = ("a byte one program of a launch writes and another program of that launch reads or writes, not both with "
             "atomics and with no atomic ordering the two (the first program releasing a word after its access and "
             "the second acquiring that word before its own, as a lock taken with `tl.atomic_cas` and released with "
             "`tl.atomic_xchg` does, or a counter every program bumps with `tl.atomic_add`; Triton's atomics "
             "acquire and release by default, `sem=\"acq_rel\"`, and one with `sem=\"relaxed\"` or `scope=\"cta\"` "
             "orders nothing)")

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
    races: list[str] = dataclasses.field(default_factory=list)  # each launch's data race, as the checker words it


@dataclasses.dataclass
class Outcome:
    """The calls, in order, and why a kernel does not compile for a GPU (``None`` when all do)."""

    calls: list[Call]
    compile_problem: str | None = None


def run(text: str, entry: str, calls: list[tuple], *, allow: tuple[str, ...] = (), timeout: float = 120.0,
        programs: dict[int, tuple[int, ...]] | None = None) -> Outcome:
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
        programs: call index -> the programs each of its launches of that many programs runs instead
            (:func:`fastpath_lib.interpreted.far_programs`, the int32 row-offset probe).
    """
    cpu = [(grid, [_cpu(a) for a in args], {k: _cpu(v) for k, v in kwargs.items()}, *(rest[:1] or [entry]))
           for grid, args, kwargs, *rest in calls]
    shapes = [(grid, *replay.shapes_only(args, kwargs), name) for grid, args, kwargs, name in cpu]
    with tempfile.TemporaryDirectory(prefix="fastpath-kernel-") as tmp:
        got = _in_child(tmp, {"text": text, "entry": entry, "calls": shapes, "absent": _ABSENT.get(),
                              "allow": list(allow), "programs": dict(programs or {})},
                       [(args, kwargs) for _, args, kwargs, _ in cpu], timeout)
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


@contextlib.contextmanager
def races(found: list):
    """Meanwhile, where Triton's interpreter runs this process's kernels (the in-notebook checks on a CPU), the data
    races of each launch (:class:`fastpath_lib.traffic.Race`, as its ``str``) are added to ``found``, as the grader's
    replay finds them; elsewhere, and inside another watch, nothing is watched."""
    from fastpath_lib import runtime, traffic

    if not runtime.interpreter_enabled() or traffic.watching():
        yield
        return
    with traffic.watch(races=True) as t:
        try:
            yield
        finally:
            found += [str(r) for r in t.races]


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
    2. **compile**: every kernel the record launches, by Triton's own frontend for a GPU
       (:func:`~fastpath_lib.grading.engine.compile_check.compiled_apart`);
    3. **replay**: on the real inputs, the record's operators and launches, under Triton's interpreter and
       :func:`fastpath_lib.traffic.watch`; the program's host functions are not even defined there
       (:func:`~fastpath_lib.grading.engine.replay.definitions`).
    """
    forks.prctl(4, 0)  # PR_SET_DUMPABLE 0: no process of this user reads this one's memory or files (/proc/<pid>/mem)
    forks.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: what the record's process leaves is this one's to end
    req = torch.load(request, weights_only=True)
    if req.get("absent"):  # before the learner's program: in every step alike
        from fastpath_lib.grading.engine import absent

        absent.install(req["absent"])
    from fastpath_lib.grading.engine import host_ops

    # after the grader's imports, before any of the learner's program (its module-level code included): the record's
    # and the replay's processes inherit it
    host_ops.install(req.get("allow", ()), guarded=bool(req.get("absent")))
    held, size = forks.held_apart(values)
    work = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(result)))
    recorded = os.path.join(work, "record.pt")
    status = forks.forked(lambda: _record(req, recorded))
    forks.end_strays()
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
    problem, visited = compile_check.compiled_apart(req["text"], [s for per_call in seen for s in per_call],
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
        status = forks.forked(lambda: _replay(program, records, inputs, ran, req.get("programs") or {}))
        if not os.path.exists(ran):
            raise SystemExit(f"the replay ended without an answer (wait status {status})")
        got = _load(ran)
        # a launch ran what the compile step never compiled, or what Triton's interpreter cannot run: the part's
        said = [re.search(r"your kernel runs code under the interpreter .*? for a GPU|"
                          + re.escape(gaps.INTERPRETER_GAP.split(":")[0]) + ".*", str(c["error"][1]), re.S)
                for c in got["calls"] if c.get("error")]
        problem = next((m.group(0) for m in said if m), None)
        for call, mine, recorded in zip(got["calls"], got.pop("seen"), seen):  # a call that raised stopped early
            if mine != (recorded if call.get("error") is None else recorded[:len(mine)]):
                problem = "the grader's replay of your launcher launched other kernels than its record"
    got["compile_problem"] = problem
    with contextlib.suppress(OSError):
        os.unlink(result)
    _save(got, result)


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
        ns, failed = compile_check.exec_program(req["text"],
                                                os.path.join(os.path.dirname(path), "your_notebook.py")), None
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
        status = forks.forked(one)
        if not os.path.exists(f"{path}.{i}"):
            _save({"error": ["Refused", replay.VALUE_READ.format(
                why=f"its process ended, wait status {status}: a read of memory through data_ptr(), which on a "
                    f"tensor with no values points near address zero")]}, f"{path}.{i}")


def _replay(program: str, records: list, inputs: list, path: str, far: dict | None = None) -> None:
    """Step 3 of :func:`_child`: each record run on its call's real inputs, with the kernels of ``program``
    (:func:`~fastpath_lib.grading.engine.replay.definitions` with what the compile step visited);
    ``{"calls": [...], "seen": [...]}`` (per call, each launch's kernel and arguments as the compile step reads them)
    written to ``path``."""
    os.environ["TRITON_INTERPRET"] = "1"
    from triton.runtime.interpreter import InterpretedFunction

    from fastpath_lib import interpreted, traffic

    interpreted.install()  # this process replays the learner's kernels only: bf16 arithmetic as on a GPU
    interpreted.install_far()
    seen: list = []

    def on_launch(name, kernel, grid, args, kwargs):
        bound = dict(zip(kernel.arg_names, args)) | kwargs
        seen.append([name, {k: replay.describe(v) for k, v in bound.items()}])
        return kernel[grid](*args, **kwargs)
    where = os.path.join(os.path.dirname(path), "your_kernels.py")
    ns = compile_check.exec_program(program, where)
    kernels = {k: replay.Recorded(v, k, on_launch) for k, v in ns.items() if isinstance(v, InterpretedFunction)}
    ns.update(kernels)  # a kernel's calls of the others, by global name
    calls, by_call = [], []
    for i, (record, (args, kwargs)) in enumerate(zip(records, inputs)):
        interpreted.select_far((far or {}).get(i))  # the int32 row-offset probe's programs (grading.engine.far_rows)
        call: dict = {"args": args}
        before = len(seen)
        t = None
        try:
            if "error" in record:
                raise replay.Refused(*record["error"][1:])
            again = replay.Replay(replay.leaves([args, kwargs], []), "cpu", kernels)
            with traffic.watch(races=True) as t:
                for step in record["steps"]:
                    again.step(step)
                call["out"] = again.decode(record["out"])
        except replay.Refused as exc:
            call["error"] = (str(record.get("error", ["Refused"])[0]), str(exc)[:1000])
        except Exception as exc:  # noqa: BLE001 - the learner's exception is an answer
            gap = gaps.interpreter_gap(exc, where, ns)
            call["error"] = (type(exc).__name__, gap[:1500] if gap else str(exc).strip()[:500])
            t = None
        if t is not None and "error" not in call:
            call["traffic"] = [launch_traffic(launch) for launch in t.launches]
            call["oob"] = [str(o) for o in t.oob]
            call["oob_accesses"] = int(t.oob_accesses)
            call["races"] = [str(r) for r in t.races]
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
