"""GPU evidence in one command: ``python -m fastpath_lib evidence --out DIR [--budget-s 480] [--dry-run] [--force]``.

On a CUDA machine with only torch, triton, numpy, pandas, matplotlib, pytest and hypothesis installed (``PYTHONPATH=.``
from a plain checkout), it runs, in order (:data:`STEPS`): the self-test; the ``gpu`` tests and the core tests on
CUDA with JUnit XML; ``compute-sanitizer --tool memcheck`` over the boundary shapes (its absence or refusal recorded,
not fatal); the copy bandwidth; the full predeclared matrix; the row-threshold sweep with its proposal; the workload
replay; the compile cost; the compiled kernels' facts for the matrix's widths (vector width, registers, spills, for
sm_80, sm_90 and this GPU's architecture); then, for every other registered operator (:mod:`fastpath_lib.opspec`:
fused residual-add + RMSNorm, ...), its predeclared matrix against all its baselines, its row sweep, its workload
replay, its compile cost and its kernels' compiled facts (:func:`op_steps`, written under ``ops/NAME/``); after all
the matrices, one host-overhead step for every op (each op's rows appended to its results table, vLLM's dispatch
included where the op is a vLLM IR op); the PR note.

Time-boxing: every step runs in its own process (a sticky CUDA error or a hang cannot take the run down) with a
budget: its weight's share of the time still left, so time a step does not use flows to the later ones. Each step
belongs to one operator (``op``) or is shared; ``manifest.json`` records the split (:func:`budget_split`: each op's
share of the weights and nominal seconds, then the seconds its steps used). A step that
overruns is cut (its process group killed) and recorded as failed; steps that adapt (the matrix, the sweep, the
sanitizer, the tests) also get their deadline and stop early on their own.

Output: DIR is written atomically like ``bench`` does (a hidden staging folder renamed when the run ends); it keeps
what finished when a later step fails or the budget runs out, and ``manifest.json`` records every step (ran / skipped /
failed, why, seconds, budget, whether it was cut, the files it wrote, its log under ``logs/``). Ctrl-C or SIGTERM stops
the current step, records it, and still finishes the folder. Exit status: 0 when no step failed, 1 when any did, 2
for bad usage or a machine without CUDA (one line naming CUDA; nothing is written). ``--dry-run`` prints the plan
with each step's budget and checks that everything the steps need imports; it runs anywhere.

The run opts in to nothing: Triton's interpreter is never used (a set ``TRITON_INTERPRET`` is refused), so every
timing is a GPU measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastpath_lib.bench import step_process
from fastpath_lib.runtime import ROOT, child_env, stop_process_group

__all__ = ["Step", "STEPS", "DEFAULT_BUDGET_S", "SHARED", "all_steps", "op_steps", "plan", "budget_split",
           "run_evidence", "dry_run", "main"]

DEFAULT_BUDGET_S = 480.0
_GRACE_S = 5.0  # after the budget: SIGTERM, then SIGKILL this much later
_STEPS_MODULE = "fastpath_lib.bench.evidence_steps"


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the evidence run.

    Args:
        name: identifier (manifest key, log name).
        title: what it does, in words.
        weight: its share of the budget (relative to the steps after it).
        target: ``"module:function"`` run in a child process with a :class:`~fastpath_lib.bench.evidence_steps.
            StepContext`.
        writes: the files it writes (for the plan).
        needs: modules it imports (checked by ``--dry-run``).
        min_s: below this many seconds left it is skipped rather than started.
        op: the registered operator the step serves (passed to the step as ``ctx.op``); ``None`` for a shared step.
    """

    name: str
    title: str
    weight: float
    target: str
    writes: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    min_s: float = 3.0
    op: str | None = None


def _s(name: str) -> str:
    return f"{_STEPS_MODULE}:{name}"


_CORE = ("torch", "triton", "numpy", "fastpath_lib", "fastpath_lib.rmsnorm.kernels", _STEPS_MODULE)
_RMS = "rms_norm"
#: The ``op`` key of the shared steps in :func:`budget_split`.
SHARED = "shared"

_BASE_STEPS: tuple[Step, ...] = (
    Step("selftest", "self-test: the kernels on CUDA against the float64 reference", 30, _s("selftest"),
         ("selftest.txt",), _CORE + ("fastpath_lib.selftest",)),
    Step("gpu_tests", "pytest -m gpu tests (the CUDA-only tests), JUnit XML", 45, _s("gpu_tests"),
         ("tests/gpu.xml",), _CORE + ("pytest",)),
    Step("core_tests", "the core tests on CUDA (predicate, boundaries, contract, modes, hypothesis), JUnit XML", 75,
         _s("core_tests"), ("tests/core.xml",), _CORE + ("pytest", "hypothesis")),
    Step("sanitizer", "compute-sanitizer --tool memcheck over the boundary shapes (absence or refusal recorded)", 45,
         _s("sanitizer"), ("sanitizer/memcheck.txt",), _CORE + ("fastpath_lib.boundary", "fastpath_lib.testing")),
    Step("copy_bandwidth", "device-to-device copy bandwidth (the ceiling for % of copy)", 10, _s("copy_bandwidth"),
         ("copy_bandwidth.json",), _CORE + ("fastpath_lib.bench.timing",)),
    Step("matrix", "the full predeclared matrix (torch.compile last, so a short budget loses it first)", 130,
         _s("matrix"), ("results.csv", "environment.json", "boundary.png", "boundary.csv"),
         _CORE + ("pandas", "matplotlib", "fastpath_lib.bench.opbench"), op=_RMS),
    Step("sweep", "the row-threshold sweep and its proposal", 45, _s("sweep"),
         ("threshold.csv", "threshold_proposal.json"), _CORE + ("fastpath_lib.bench.sweep",), op=_RMS),
    Step("replay", "workload replay (a small decoder, norms swapped)", 25, _s("replay"), ("replay.json",),
         _CORE + ("fastpath_lib.bench.workload",), op=_RMS),
    Step("capture", "CUDA-graph capture at the boundary shapes, replayed on new data against the reference", 15,
         "fastpath_lib.bench.capture:step", ("capture_test.json",), _CORE + ("fastpath_lib.bench.capture",), op=_RMS),
    Step("compile_cost", "compile cost per kernel specialization (fresh process, empty cache)", 40, _s("compile_cost"),
         ("compile_cost.json",), _CORE + ("fastpath_lib.bench.workload",), op=_RMS),
    Step("compiled", "compile-time facts of the matrix's kernel specializations (vector width, registers, spills)",
         20, _s("compiled_facts"), ("compiled.json",), _CORE + ("fastpath_lib.rmsnorm.compiled",), op=_RMS),
)
#: After every op's matrix (whose step writes the results table the host rows are appended to), one step for all.
_HOST = Step("host", "host overhead of every op's dispatch (vs its baseline, vs the launcher, vLLM's dispatch vs "
             "native), appended to each op's results.csv", 30, _s("host"),
             ("results.csv (host-overhead rows)", "ops/NAME/results.csv (host-overhead rows)"),
             _CORE + ("fastpath_lib.opspec", "fastpath_lib.bench.ophost", "fastpath_lib.bench.vllmhost"))
_PR_NOTE = Step("pr_note", "the PR note drafted from this folder", 15, _s("pr_note"), ("pr_note.md",),
                _CORE + ("fastpath_lib.bench.report",))


def _op_files(name: str, *files: str) -> tuple[str, ...]:
    return tuple(f"ops/{name}/{f}" for f in files)


def op_steps(name: str) -> tuple[Step, ...]:
    """The steps of a registered operator other than RMSNorm (whose steps are the plan's own): its predeclared matrix
    against every baseline, its row sweep (fast route against the first baseline), its workload replay (the serving
    trace and the small decoder), its compile cost, and its kernels' compiled facts, written under ``ops/NAME/``. A
    step whose spec field is missing says so and is skipped."""
    needs = _CORE + ("fastpath_lib.opspec", "fastpath_lib.bench.opbench")
    return (Step(f"{name}_matrix", f"{name}: its predeclared matrix against all its baselines", 70, _s("matrix"),
                 tuple(f"ops/{name}/{f}" for f in ("results.csv", "environment.json", "boundary.png")), needs,
                 op=name),
            Step(f"{name}_sweep", f"{name}: its fast route against its first baseline across row counts", 12,
                 _s("sweep"), _op_files(name, "threshold.csv", "threshold_proposal.json"),
                 needs + ("fastpath_lib.bench.sweep",), op=name),
            Step(f"{name}_replay", f"{name}: workload replay (the serving trace; a small decoder, norms swapped)", 10,
                 _s("replay"), _op_files(name, "replay.json"),
                 needs + ("fastpath_lib.bench.trace", "fastpath_lib.bench.workload"), op=name),
            Step(f"{name}_compile_cost", f"{name}: compile cost per specialization (fresh process, empty cache)", 10,
                 _s("compile_cost"), _op_files(name, "compile_cost.json"), needs + ("fastpath_lib.bench.workload",),
                 op=name),
            Step(f"{name}_compiled", f"{name}: compile-time facts of its kernels (vector width, registers, spills)",
                 10, _s("compiled_facts"), (f"ops/{name}/compiled.json",), needs + ("fastpath_lib.rmsnorm.compiled",),
                 op=name))


def all_steps() -> tuple[Step, ...]:
    """The plan for every operator registered now (:func:`fastpath_lib.opspec.names`): RMSNorm's steps and the shared
    ones, each other op's :func:`op_steps`, the host-overhead step of every op (after all the matrices, whose results
    tables its rows join), then the PR note."""
    from fastpath_lib import opspec

    return _BASE_STEPS + tuple(s for n in opspec.names() if n != _RMS for s in op_steps(n)) + (_HOST, _PR_NOTE)


#: The plan at import (the ops registered by name in :mod:`fastpath_lib.opspec`).
STEPS: tuple[Step, ...] = all_steps()


def plan(budget_s: float, steps=STEPS) -> list[tuple[Step, float]]:
    """Each step with its nominal budget: its weight's share of ``budget_s`` (time a step leaves flows onward).

    >>> round(sum(b for _, b in plan(480)), 6)
    480.0
    """
    total = sum(s.weight for s in steps)
    return [(s, budget_s * s.weight / total) for s in steps]


def budget_split(budget_s: float, steps=STEPS) -> dict:
    """Each operator's share of the run (``"shared"`` for the steps every op relies on): its steps, its share of the
    weights and its nominal seconds of ``budget_s``.

    >>> split = budget_split(480)
    >>> sorted(split) == sorted({SHARED, *(s.op for s in STEPS if s.op)})
    True
    >>> round(sum(v["nominal_s"] for v in split.values()))
    480
    """
    total = sum(s.weight for s in steps) or 1.0
    out: dict[str, dict] = {}
    for s in steps:
        e = out.setdefault(s.op or SHARED, {"steps": [], "weight": 0.0})
        e["steps"].append(s.name)
        e["weight"] += s.weight
    for e in out.values():
        e["share"] = round(e["weight"] / total, 4)
        e["nominal_s"] = round(budget_s * e["weight"] / total, 1)
    return out


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def _write_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


class _Stop(Exception):
    """Ctrl-C or SIGTERM arrived."""


def _run_step(step: Step, staging: Path, budget: float) -> dict:
    """Run one step in a child process, cut it at its budget, and return its manifest entry."""
    logs = staging / "logs"
    logs.mkdir(exist_ok=True)
    result = logs / f".{step.name}.result.json"
    result.unlink(missing_ok=True)
    before = _files(staging)
    entry = {"name": step.name, "title": step.title, "budget_s": round(budget, 1), "started": _now(),
             "log": f"logs/{step.name}.log", "cut": False}
    cmd = step_process.command(step.target, staging, budget, result, step.op)
    t0 = time.monotonic()
    with open(logs / f"{step.name}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env=child_env(), start_new_session=True)
        try:
            proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            stop_process_group(proc, _GRACE_S)
            entry.update(status="failed", cut=True, why=f"cut: overran its budget of {budget:.0f} s")
        except _Stop:
            stop_process_group(proc, _GRACE_S)
            entry.update(status="failed", cut=True, why="interrupted (Ctrl-C / SIGTERM) while running")
            entry["seconds"] = round(time.monotonic() - t0, 1)
            raise _StopWith(entry) from None
    entry["seconds"] = round(time.monotonic() - t0, 1)
    entry["exit_code"] = proc.returncode
    if not entry["cut"]:
        if result.exists():
            res = json.loads(result.read_text())
            entry.update(status=res.get("status", "failed"), why=res.get("why", ""))
            if res.get("details"):
                entry["details"] = res["details"]
        else:
            tail = (logs / f"{step.name}.log").read_text(errors="replace").strip().splitlines()[-1:] or [""]
            entry.update(status="failed", why=f"the step's process exited with status {proc.returncode} without a "
                                              f"result: {tail[0][:300]}")
    result.unlink(missing_ok=True)
    entry["outputs"] = sorted(_files(staging) - before - {entry["log"]})
    return entry


class _StopWith(Exception):
    def __init__(self, entry: dict):
        super().__init__(entry["why"])
        self.entry = entry


def run_evidence(out_dir: str | Path, *, budget_s: float = DEFAULT_BUDGET_S, steps=STEPS, force: bool = False,
                 log=None) -> tuple[int, Path]:
    """Run ``steps`` into ``out_dir`` within ``budget_s`` seconds; the caller has checked for CUDA.

    Args:
        out_dir: the folder to create (written through a staging folder, renamed at the end).
        budget_s: the whole run's time budget.
        steps: the plan (default :data:`STEPS`; tests pass simulated steps).
        force: replace an existing ``out_dir``.
        log: ``callable(str)`` for progress lines (default: stderr).

    Returns:
        ``(exit_status, folder)``: 0 when no step failed, 1 otherwise (130 when interrupted).
    """
    import fastpath_lib.bench.results as results

    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    start = time.monotonic()
    deadline = start + budget_s
    staging = results.begin(out_dir, force=force, log=log)
    manifest = {"command": "python -m fastpath_lib evidence", "out": str(out_dir), "budget_s": budget_s,
                "started": _now(), "python": sys.version.split()[0], "interpreter_opt_in": False,
                "budget_split": budget_split(budget_s, steps),
                "steps": [{"name": s.name, "title": s.title, "status": "pending"} for s in steps]}
    _write_json(staging / "manifest.json", manifest)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def stop(signum, frame):
        raise _Stop()

    for sig in previous:
        signal.signal(sig, stop)
    interrupted = False
    try:
        for i, step in enumerate(steps):
            left = deadline - time.monotonic()
            weights = sum(s.weight for s in steps[i:])
            budget = left * step.weight / weights if weights else left
            if interrupted:
                entry = {"name": step.name, "title": step.title, "status": "skipped",
                         "why": "the run was interrupted", "seconds": 0.0}
            elif budget < step.min_s:
                entry = {"name": step.name, "title": step.title, "status": "skipped", "seconds": 0.0,
                         "why": f"the run's budget ran out ({max(left, 0):.0f} s left of {budget_s:.0f} s)"}
            else:
                log(f"evidence [{i + 1}/{len(steps)}] {step.name}: {step.title} (budget {budget:.0f} s)")
                try:
                    entry = _run_step(step, staging, budget)
                except _StopWith as stopped:
                    entry, interrupted = stopped.entry, True
                except _Stop:
                    entry = {"name": step.name, "title": step.title, "status": "skipped", "seconds": 0.0,
                             "why": "the run was interrupted"}
                    interrupted = True
                log(f"  -> {entry['status']} in {entry.get('seconds', 0):.0f} s"
                    + (f": {entry['why']}" if entry.get("why") else ""))
            manifest["steps"][i] = entry
            _write_json(staging / "manifest.json", manifest)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failed = [s["name"] for s in manifest["steps"] if s["status"] == "failed"]
    status = 130 if interrupted else 1 if failed else 0
    for e in manifest["budget_split"].values():
        e["seconds"] = round(sum(x.get("seconds", 0.0) for x in manifest["steps"] if x["name"] in e["steps"]), 1)
    manifest.update(finished=_now(), seconds=round(time.monotonic() - start, 1), failed=failed, exit_status=status,
                    counts={k: sum(s["status"] == k for s in manifest["steps"]) for k in ("ran", "skipped", "failed")})
    _write_json(staging / "manifest.json", manifest)
    folder = results.finish(staging, out_dir, force=force)
    log(f"evidence: wrote {folder} in {manifest['seconds']:.0f} s; " + ", ".join(
        f"{k} {v}" for k, v in manifest["counts"].items()) + (f"; failed: {', '.join(failed)}" if failed else ""))
    return status, folder


def _check_imports(steps) -> list[str]:
    problems = []
    for mod in dict.fromkeys(m for s in steps for m in s.needs):
        try:
            importlib.import_module(mod)
        except Exception as exc:  # noqa: BLE001 - every import problem is reported, none is fatal here
            problems.append(f"cannot import {mod}: {type(exc).__name__}: {exc}")
    return problems


def dry_run(budget_s: float = DEFAULT_BUDGET_S, steps=STEPS, *, collect: bool = True, out=print) -> int:
    """Print the plan with each step's budget, check the imports and the test collection; 0 when all is in place."""
    from fastpath_lib import runtime
    import fastpath_lib.bench.evidence_steps as evidence_steps

    out(f"evidence plan: {len(steps)} steps within {budget_s:.0f} s (each step gets its weight's share of the time "
        "still left; a step that overruns is cut and recorded)")
    width = max([15, *(len(s.name) for s in steps)])
    for i, (s, b) in enumerate(plan(budget_s, steps), 1):
        out(f"  {i:>2}. {s.name:<{width}} {b:6.0f} s  {s.title}")
        out(f"      writes: {', '.join(s.writes) or '-'}")
    out("budget split (manifest.json's budget_split): " + "; ".join(
        f"{op} {e['share']:.0%} ({e['nominal_s']:.0f} s)" for op, e in budget_split(budget_s, steps).items()))
    out(f"here: {runtime.describe()}")
    out("CUDA: " + ("present: `evidence --out DIR` would run the plan" if runtime.cuda_available() else
                    "absent: `evidence --out DIR` exits with status 2 and writes nothing"))
    tool = evidence_steps.find_sanitizer()
    out(f"compute-sanitizer: {tool or 'not found (the sanitizer step will be skipped and say so)'}")
    problems = _check_imports(steps)
    if collect:
        ok, line = evidence_steps.collect_tests()
        out(f"test collection: {line}")
        if not ok:
            problems.append(f"the tests do not collect: {line}")
    for p in problems:
        out(f"PROBLEM: {p}")
    out("dry run: " + ("everything the steps need imports" if not problems else f"{len(problems)} problem(s)"))
    return 0 if not problems else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m fastpath_lib evidence --out DIR [--budget-s 480] [--dry-run] [--force]``."""
    p = argparse.ArgumentParser(prog="python -m fastpath_lib evidence", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="the folder to write (must not exist unless --force)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="the whole run's time budget (seconds)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and check imports; runs anywhere")
    p.add_argument("--force", action="store_true", help="replace an existing folder")
    args = p.parse_args(argv)
    if args.budget_s <= 0:
        print("error: --budget-s must be positive", file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(args.budget_s, all_steps())
    if not args.out:
        print("error: --out DIR is required (or --dry-run)", file=sys.stderr)
        return 2
    from fastpath_lib import runtime

    if not runtime.cuda_available():
        print("error: no CUDA device (torch.cuda.is_available() is False): the evidence run measures the kernels on "
              "a CUDA GPU; nothing was written (--dry-run shows the plan here)", file=sys.stderr)
        return 2
    if runtime.interpreter_enabled():
        print("error: TRITON_INTERPRET is set: the evidence run measures the compiled kernels on CUDA; unset it",
              file=sys.stderr)
        return 2
    if Path(args.out).exists() and not args.force:
        print(f"error: {args.out} already exists; pass --force to replace it, or choose another folder",
              file=sys.stderr)
        return 2
    status, _ = run_evidence(args.out, budget_s=args.budget_s, steps=all_steps(), force=args.force)
    return status


if __name__ == "__main__":
    sys.exit(main())
