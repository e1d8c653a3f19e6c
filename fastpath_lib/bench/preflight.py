"""The evidence run's preflight: at most :data:`PREFLIGHT_S` seconds that refuse to start a run that cannot succeed,
each refusal with its reason.

A lent GPU is borrowed for minutes, with one unattended try; a run that would fail in its first step (no CUDA, no C
compiler for Triton's launcher, a GPU that cannot launch or capture) should fail here, in seconds, saying why, and
write nothing. The checks, in order (:func:`preflight`):

* ``cuda``: a CUDA device is visible to torch and Triton's interpreter is off;
* ``toolchain``: where this Triton's NVIDIA driver builds C code with the host compiler on first use (Triton 3.6
  its launcher, Triton 3.8 its ``driver.c`` utilities, which include ``Python.h``: both through
  ``triton.runtime.build.compile_module_from_*``), a host C compiler (``$CC``, ``gcc`` or ``clang``, Triton's own
  order) and ``Python.h`` (in ``sysconfig``'s include folder, Triton's own scheme rule);
* ``plan``: the step plan's minimums fit the budget with this preflight;
* ``device``: in a child process with a time limit (a hung driver cannot hang the run): one JIT launch of the kit's
  forward kernel checked against the reference, one CUDA-graph capture of it replayed on new data, the free device
  memory (at least :data:`MIN_FREE_GIB`) and the device's name.

Off CUDA, the device check is not started: the refusal names CUDA (and any other check that fails here).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

__all__ = ["PREFLIGHT_S", "PREFLIGHT_EST_S", "MIN_FREE_GIB", "Check", "toolchain", "needs_c_launcher", "device_probe",
           "preflight", "refusal"]

#: The preflight's time limit (counted in the run's budget).
PREFLIGHT_S = 60.0
#: What the preflight is expected to take on the GPU machine (estimate: its checks' imports, torch and CUDA's start,
#: one kernel compile with Triton 3.6's C launcher build, one capture), for the plan's expected total.
PREFLIGHT_EST_S = 20.0
#: Free device memory the plan needs: the largest matrix inputs, the replay's two decoders (dim 4096, 4 layers, bf16),
#: the caching allocator's slack.
MIN_FREE_GIB = 8.0

Check = dict  # {"check": name, "ok": bool, "detail": str}


def _check(name: str, ok: bool, detail: str) -> Check:
    return {"check": name, "ok": bool(ok), "detail": detail}


def needs_c_launcher() -> bool | None:
    """Whether this Triton's NVIDIA driver builds C code with the host compiler on first use (its launcher in Triton
    3.6, its ``driver.c`` utilities in 3.8; ``None`` when the driver module cannot be found)."""
    spec = importlib.util.find_spec("triton.backends.nvidia.driver")
    if spec is None or not spec.origin:
        return None
    return "compile_module_from_" in Path(spec.origin).read_text(errors="replace")


def toolchain(which=shutil.which, environ=None, include: str | None = None) -> Check:
    """The host C compiler and ``Python.h`` Triton's launcher build uses, found the way Triton finds them.

    Args:
        which, environ, include: ``shutil.which``, ``os.environ`` and the include folder (tests pass fakes).
    """
    environ = os.environ if environ is None else environ
    cc = environ.get("CC") or which("gcc") or which("clang")
    if include is None:
        scheme = sysconfig.get_default_scheme()
        include = sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]
    header = Path(include) / "Python.h"
    problems = []
    if not cc:
        problems.append("no C compiler ($CC unset, neither gcc nor clang on PATH)")
    if not header.is_file():
        problems.append(f"no Python.h in {include} (install the Python development headers)")
    if problems:
        return _check("toolchain", False, "Triton builds C code at a kernel's first launch and needs a C "
                                          "compiler and Python.h: " + "; ".join(problems))
    return _check("toolchain", True, f"C compiler {cc}, {header}")


_PROBE = r"""
import json, sys, time
import torch
out = {}
t0 = time.monotonic()


def outputs(y):
    return [t for t in (y if isinstance(y, (tuple, list)) else (y,)) if isinstance(t, torch.Tensor)]


def error(y, ref):
    return max((a.double() - b.double()).abs().max().item() for a, b in zip(outputs(y), outputs(ref)))


try:
    from fastpath_lib import opspec
    from fastpath_lib.bench.trace import call_args
    spec = opspec.default()
    args = call_args(spec, 64, 256, torch.float32, "cuda")
    y = spec.fast(*args)
    torch.cuda.synchronize()
    err = error(y, spec.reference(*args))
    out["jit"] = {"ok": err < 1e-4, "detail": f"one launch of {spec.name}'s fast route, max error {err:.2e} "
                  f"({time.monotonic() - t0:.1f} s with its compile)"}
except Exception as exc:
    out["jit"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:600]}
try:
    args = call_args(spec, 64, 256, torch.float32, "cuda", seed=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        spec.fast(*args)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ys = spec.fast(*args)
    args[0].copy_(torch.randn_like(args[0]))
    g.replay()
    torch.cuda.synchronize()
    err = error(ys, spec.reference(*args))
    out["capture"] = {"ok": err < 1e-4, "detail": f"captured, replayed on new data, max error {err:.2e}"}
except Exception as exc:
    out["capture"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:600]}
try:
    free, total = torch.cuda.mem_get_info()
    out["memory"] = {"free_gib": free / 2**30, "total_gib": total / 2**30}
    out["device_name"] = torch.cuda.get_device_name()
    out["capability"] = "sm_%d%d" % torch.cuda.get_device_capability()
except Exception as exc:
    out["memory"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
print("PREFLIGHT " + json.dumps(out), flush=True)
"""


def device_probe(timeout: float, run=subprocess.run) -> dict:
    """Run the device checks in a child process within ``timeout`` seconds; their JSON, or ``{"error": why}``."""
    from fastpath_lib.runtime import ROOT, child_env

    try:
        res = run([sys.executable, "-c", _PROBE], cwd=ROOT, env=child_env(), capture_output=True, text=True,
                  timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"the device checks did not finish within {timeout:.0f} s (a hung driver or compile?)"}
    lines = [ln for ln in (res.stdout or "").splitlines() if ln.startswith("PREFLIGHT ")]
    if not lines:
        tail = ((res.stderr or "") + (res.stdout or "")).strip().splitlines()[-3:]
        return {"error": f"the device checks exited {res.returncode} without a result: {' | '.join(tail)[:600]}"}
    return json.loads(lines[-1][len("PREFLIGHT "):])


def preflight(budget_s: float, steps, *, timeout: float = PREFLIGHT_S, cuda: bool | None = None,
              interpreter: bool | None = None, launcher: bool | None = None, probe=device_probe,
              tools=toolchain) -> tuple[bool, list[Check]]:
    """Every check, in order; ``(ok, checks)``. The device check runs only where CUDA is visible, with what is left of
    ``timeout``.

    Args:
        budget_s, steps: the run's budget and plan (:func:`fastpath_lib.bench.evidence.fits`).
        timeout: the preflight's own limit.
        cuda, interpreter, launcher: override the detection (tests; ``launcher``: :func:`needs_c_launcher`).
        probe, tools: the device and toolchain checks (tests pass fakes).
    """
    from fastpath_lib import runtime
    from fastpath_lib.bench.evidence_plan import fits

    t0 = time.monotonic()
    cuda = runtime.cuda_available() if cuda is None else cuda
    interpreter = runtime.interpreter_enabled() if interpreter is None else interpreter
    checks = []
    if not cuda or interpreter:  # each failing half named: a run without CUDA may have the interpreter set too
        why = (["no CUDA device (torch.cuda.is_available() is False): the evidence run measures the kernels on a "
                "CUDA GPU"] if not cuda else []) + (["TRITON_INTERPRET is set: the evidence run measures the compiled "
                                                     "kernels on CUDA; unset it"] if interpreter else [])
        checks.append(_check("cuda", False, "; ".join(why)))
    else:
        checks.append(_check("cuda", True, "a CUDA device is visible; Triton's interpreter is off"))
    launcher = needs_c_launcher() if launcher is None else launcher
    if launcher is False:
        checks.append(_check("toolchain", True, "this Triton builds no C code at launch: no compiler needed"))
    else:
        checks.append(tools())
    ok_plan, line = fits(budget_s, steps, timeout, min(timeout, PREFLIGHT_EST_S))
    checks.append(_check("plan", ok_plan, line))
    if checks[0]["ok"]:
        left = max(5.0, timeout - (time.monotonic() - t0))
        res = probe(left)
        if "error" in res:
            checks.append(_check("device", False, res["error"]))
        else:
            for key, name in (("jit", "jit_launch"), ("capture", "graph_capture")):
                r = res.get(key) or {"ok": False, "detail": "not reported"}
                checks.append(_check(name, r["ok"], r["detail"]))
            mem = res.get("memory") or {}
            free = mem.get("free_gib")
            checks.append(_check("memory", free is not None and free >= MIN_FREE_GIB,
                                 f"{free:.1f} of {mem.get('total_gib', 0):.1f} GiB free (the plan needs "
                                 f"{MIN_FREE_GIB:.0f} GiB)" if free is not None else f"unknown: {mem.get('error')}"))
            checks.append(_check("device_name", bool(res.get("device_name")),
                                 f"{res.get('device_name')} ({res.get('capability')})"))
    return all(c["ok"] for c in checks), checks


def refusal(checks: list[Check]) -> str:
    """The lines a refused preflight prints: one per failed check, with its reason."""
    bad = [c for c in checks if not c["ok"]]
    return "\n".join([f"error: the evidence preflight refused to start ({len(bad)} check(s) failed); nothing was "
                      "written"] + [f"  {c['check']}: {c['detail']}" for c in bad])
