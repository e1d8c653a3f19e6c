"""Where the kit is running: CUDA or Triton's CPU interpreter, and the versions that matter.

Importing :mod:`fastpath_lib` registers the kit's own ``fastpath::`` operators with torch's dispatcher and changes
nothing else process-wide (no torch operator, no environment variable, not Triton's mode). Running the Triton kernels on
a CPU through Triton's interpreter is an explicit opt-in: call :func:`use_interpreter` (the lessons' first cell, the
test suite and ``./kit`` do), or set ``TRITON_INTERPRET=1`` yourself, before the first kernel is imported. Triton reads
that variable when a kernel is *decorated* (``triton.jit``), and :mod:`fastpath_lib.rmsnorm.kernels` is only imported on
the first Triton-route call. Without the opt-in, a CPU call takes the fallback with the ``device`` reason.

The mode is read once (on first use) and kept, so the dispatch's hot path never reads the environment.

Nothing here needs a GPU driver: no ``do_bench``, no ``autotune``, no active-device queries.

Child processes (the evidence run's steps, the tests they run, the grader's kernels) get their environment from
:func:`child_env` and are stopped, with everything they started, by :func:`stop_process_group`.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

import torch

__all__ = ["parse_source", "use_interpreter", "interpreter_enabled", "cuda_available", "kernel_device",
           "lesson_device", "describe", "versions", "ENV", "ROOT", "child_env", "stop_process_group",
           "INTERPRETER_BF16"]

ENV = "TRITON_INTERPRET"
#: The checkout the kit runs from (the folder holding ``fastpath_lib/``): results, tests and tools live here.
ROOT = Path(__file__).resolve().parents[1]
_KERNELS = "fastpath_lib.rmsnorm.kernels"
#: Triton's supported NVIDIA GPUs start at compute capability 8.0; a T4 (7.5) takes the kernels only inside
#: ``fastpath_lib.selftest.allow_sm75()`` (the same values as :mod:`fastpath_lib.rmsnorm.limits`; a test checks).
TRITON_MIN_CAPABILITY, T4_CAPABILITY = (8, 0), (7, 5)
#: The oldest torch and triton the kit is tested with (pyproject's floors).
TESTED_FLOORS = {"torch": (2, 11), "triton": (3, 6)}
_interpret: bool | None = None  # None: not read from the environment yet
_opted_in = False


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (never raises)."""
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # broken driver installs raise here
        return False


def _env_flag() -> bool:
    return os.environ.get(ENV, "0").strip().lower() in ("1", "true", "yes", "on")


def use_interpreter(force: bool = False) -> bool:
    """Opt in to Triton's CPU interpreter when there is no CUDA device (always with ``force=True``).

    Sets ``TRITON_INTERPRET=1`` for this process (Triton reads it when kernels are decorated), so call it before the
    first Triton-route call. On a CUDA machine it does nothing unless forced, so a lesson runs on the GPU unchanged.

    Returns:
        whether the kernels run in the interpreter from now on.

    Raises:
        RuntimeError: the kernels were already imported in the other mode (restart the kernel or process).

    >>> import fastpath_lib
    >>> fastpath_lib.use_interpreter() in (True, False)
    True
    """
    global _interpret, _opted_in
    want = True if force else (interpreter_enabled() or not cuda_available())
    if want and _KERNELS in sys.modules and not interpreter_enabled():
        raise RuntimeError("the Triton kernels were already imported for CUDA; call use_interpreter() (or set "
                           f"{ENV}=1) before the first Triton-route call, in a fresh process")
    if want and not _env_flag():
        os.environ[ENV] = "1"
        _opted_in = True
    _interpret = want
    return want


def interpreter_enabled() -> bool:
    """Whether Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``, read once and kept)."""
    global _interpret
    if _interpret is None:
        _interpret = _env_flag()
    return _interpret


#: What a bf16 value that differs from the reference under the interpreter may be: the interpreter's cast, not the
#: kernel (``fastpath_lib.triton_casts`` says why; ``fastpath_lib.gradcheck.rounding_hint`` says where it can be).
INTERPRETER_BF16 = ("under Triton's interpreter this may be its bf16 rounding, not the kernel (its fp32-to-bf16 cast "
                    "truncates where a GPU rounds to nearest even): convert with fastpath_lib.triton_casts (to_fp32 on "
                    "loads, round_to on stores) and run it again")


def _reset_for_tests(value: bool | None = None) -> None:
    """Forget (or set) the kept mode; tests that probe the other mode call this, never the hot path."""
    global _interpret
    _interpret = value


def versions() -> dict[str, str]:
    """torch, triton, numpy and python versions as strings (``"missing"`` when not installed)."""
    out = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("triton", "numpy"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = "missing"
    return out


def describe() -> str:
    """One line naming the mode and the versions (``"mode: ... | torch ..."``), for logs and result folders."""
    return f"{_mode_line()} | {_versions_line()}"


def _versions_line() -> str:
    v = versions()
    return f"torch {v['torch']}, triton {v['triton']}, numpy {v['numpy']}, python {v['python']} ({sys.platform})"


def _mode_line() -> str:
    if interpreter_enabled():
        how = f"Triton CPU interpreter ({ENV}=1" + (", set by use_interpreter()" if _opted_in else "") + ")"
        return f"mode: {how}; timings are not GPU measurements"
    if cuda_available():
        cap = torch.cuda.get_device_capability()
        return f"mode: CUDA on {torch.cuda.get_device_name()} (sm_{cap[0]}{cap[1]})"
    return "mode: CPU without the Triton interpreter; every call takes the fallback (call use_interpreter())"


def kernel_device() -> str:
    """Where the kernels run: ``"cuda"`` when CUDA is present and the interpreter is off, else ``"cpu"`` (which takes
    the Triton route only under the interpreter). Tests, checks and lessons build their tensors there."""
    return "cuda" if cuda_available() and not interpreter_enabled() else "cpu"


def _older_than_tested() -> list[str]:
    out = []
    for name, floor in TESTED_FLOORS.items():
        got = tuple(int(p) for p in (versions()[name].split("+")[0].split(".") + ["0", "0"])[:2] if p.isdigit())
        if len(got) == 2 and got < floor:
            out.append(f"{name} {versions()[name]} (tested from {floor[0]}.{floor[1]})")
    return out


def lesson_device() -> str:
    """:func:`kernel_device`, after printing the mode, the versions and what they mean for the numbers a lesson
    shows, a line each (the lessons' first cell). On a GPU older than sm_80 (a hosted T4) it says that every
    dispatched call takes the fallback, and how a learner opts in."""
    dev = kernel_device()
    print(_mode_line())
    print("versions:", _versions_line())
    old = _older_than_tested()
    if old:
        print(f"untested: {', '.join(old)}; run fastpath_lib.selftest.run() first")
    cap = tuple(torch.cuda.get_device_capability()) if dev == "cuda" else None
    if cap is not None and cap < TRITON_MIN_CAPABILITY:
        name = f"sm_{cap[0]}{cap[1]}"
        print(f"tensors on the GPU (cuda), but {name} is below Triton's supported 8.0: every dispatched call")
        print("takes the fallback (F.rms_norm), so timings are GPU measurements of the fallback, not the kernels")
        if cap == T4_CAPABILITY:
            print("kernels here (fp16, fp32; outside Triton's support matrix, unmeasured): selftest.allow_sm75()")
    elif dev == "cuda":
        print("tensors on the GPU (cuda): the kernels are compiled, and timings are GPU measurements")
    elif interpreter_enabled():
        print("tensors on the CPU: Triton kernels run in the interpreter, correct but slow")
    else:
        print("tensors on the CPU: without the interpreter every call takes the fallback")
    return dev


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child process of the kit: this one's, with the checkout first on ``PYTHONPATH`` (once),
    unbuffered output, and ``extra`` on top.

    >>> env = child_env(FOO="1")
    >>> env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT), env["FOO"], env["PYTHONUNBUFFERED"]
    (True, '1', '1')
    """
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *rest])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def stop_process_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Stop a child started with ``start_new_session=True`` and everything it started: SIGTERM to its process group,
    SIGKILL after ``grace_s`` seconds if it is still there; returns once it has exited (or was already gone)."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def parse_source(source: str, *args, **kwargs):
    """``ast.parse(source, ...)``, parsed again once where CPython raises its spurious ``SystemError: AST
    constructor recursion depth mismatch`` (CPython gh-106905; seen here with Python 3.11.7, in a process whose
    leftover asyncio task logged from a finalizer: code a finalizer runs during the tree's construction can move the
    depth the constructor checks)."""
    import ast
    import gc

    try:
        return ast.parse(source, *args, **kwargs)
    except SystemError as exc:
        if "AST constructor recursion depth mismatch" not in str(exc):
            raise
        gc.collect()  # the finalizers run now, not inside the second parse
        return ast.parse(source, *args, **kwargs)
