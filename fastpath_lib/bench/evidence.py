"""GPU evidence in one command: ``python -m fastpath_lib evidence --out DIR [--budget-s 420] [--with sanitizer]
[--op MODULE:SPEC] [--dry-run] [--force]``.

On a CUDA machine with only torch, triton, numpy, pandas, matplotlib, pytest and hypothesis installed (``PYTHONPATH=.``
from a plain checkout), it first runs a preflight of at most 60 s (:mod:`~fastpath_lib.bench.preflight`: CUDA, the host
compiler and ``Python.h`` Triton 3.6's launcher needs, one JIT launch, one CUDA-graph capture, free memory, the plan
against the budget) that refuses, with its reasons, a run that cannot succeed, and then, in order (:data:`STEPS`,
:mod:`~fastpath_lib.bench.evidence_plan`): the self-test; the ``gpu`` tests and the core tests on CUDA with JUnit XML;
the default op's predeclared matrix (RMSNorm's, with the copy bandwidth); every op's row-threshold sweep (host-inclusive
time of the dispatched call, every admitted dtype) with its proposal; every op's CUDA-graph capture test; every other
registered operator's matrix (:func:`op_steps`, under ``ops/NAME/``); every op's workload replay, compile cost and
compiled facts (one step per job, every op in it); after all the matrices, the host overhead of every op; the
``torch.compile`` baselines on a few cases; the PR note. ``--with sanitizer`` adds ``compute-sanitizer --tool memcheck``
(left out by default: it needs minutes and some lent GPUs refuse it).

Time-boxing: every step runs in its own process (a sticky CUDA error or a hang cannot take the run down) with a
budget: its fixed minimum plus its weight's share of what is left over (:func:`allot`), so time a step does not use
flows to the later ones, and a step with less than its minimum left is skipped, not started. ``manifest.json``
records each op's share (:func:`budget_split`). A step that overruns is cut (its process group killed) and recorded
as failed; steps that adapt (the matrices, the sweep, the capture, the tests, the compiled baselines) get their
deadline and stop early on their own, and say so: such a step is "partial", with what it collected and what it ran.

Output: DIR is written atomically like ``bench`` does (a hidden staging folder renamed when the run ends); it keeps
what finished when a later step fails or the budget runs out, and ``manifest.json`` records the preflight and every
step (ran / partial / skipped / failed, why, seconds, budget, whether it was cut, the files it wrote, its log under
``logs/``). A folder with any step partial, skipped or failed keeps its ``INCOMPLETE`` marker, which lists what is
missing (``complete`` and ``missing`` in the manifest); the lessons, the PR note and ``threshold`` read it and say so.
Ctrl-C or SIGTERM stops the current step, records it, and still finishes the folder. Exit status: 0 when no step
failed, 1 when any did, 2 for bad usage or a refused preflight (its reasons, one line each; nothing is written).
``--dry-run`` prints the plan with each step's minimum, expected cost (measured or estimated, and how) and budget,
whether its minimums and its expected time fit, and checks that everything the steps need imports; it runs anywhere.

An operator of the practitioner's own joins the run with ``--op MODULE:SPEC`` (or ``FASTPATH_OPS``, or an installed
entry point: :mod:`fastpath_lib.opspec`): every step's process registers it too, its matrix gets a step of its own,
and every per-op step runs it where its spec declares what that step needs, saying which field is missing otherwise.

The run opts in to nothing: Triton's interpreter is never used (a set ``TRITON_INTERPRET`` is refused), so every
timing is a GPU measurement.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastpath_lib.bench import step_process
from fastpath_lib.bench.evidence_plan import (
    DEFAULT_BUDGET_S,
    OPTIONAL,
    SHARED,
    START_S,
    STATUSES,
    STEPS,
    Step,
    all_steps,
    allot,
    budget_split,
    fits,
    op_steps,
    plan,
    sweep_line,
)
from fastpath_lib.bench.schema import INCOMPLETE_MARKER, manifest_gaps
from fastpath_lib.runtime import ROOT, child_env, stop_process_group

__all__ = ["Step", "STEPS", "OPTIONAL", "DEFAULT_BUDGET_S", "SHARED", "START_S", "STATUSES", "all_steps", "op_steps",
           "allot", "plan", "fits", "budget_split", "run_evidence", "dry_run", "main"]

_GRACE_S = 5.0  # after the budget: SIGTERM, then SIGKILL this much later


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
    entry = {"name": step.name, "title": step.title, "budget_s": round(budget, 1), "min_s": step.min_s,
             "started": _now(), "log": f"logs/{step.name}.log", "cut": False}
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
                 log=None, preflight: list | None = None, clock=time.monotonic, runner=None) -> tuple[int, Path]:
    """Run ``steps`` into ``out_dir`` within ``budget_s`` seconds; the caller has checked for CUDA.

    Args:
        out_dir: the folder to create (written through a staging folder, renamed at the end).
        budget_s: the whole run's time budget.
        steps: the plan (default :data:`STEPS`; tests pass simulated steps).
        force: replace an existing ``out_dir``.
        log: ``callable(str)`` for progress lines (default: stderr).
        preflight: the preflight's checks (:func:`fastpath_lib.bench.preflight.preflight`), kept in the manifest.
        clock, runner: the run's clock and ``runner(step, staging, budget) -> manifest entry`` (default: each step in
            its own process); the rehearsal passes a simulated clock and steps (``tests/bench/evidence_fakes.py``).

    Returns:
        ``(exit_status, folder)``: 0 when no step failed, 1 otherwise (130 when interrupted).
    """
    import fastpath_lib.bench.results as results

    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    runner = runner or _run_step
    start = clock()
    deadline = start + budget_s
    staging = results.begin(out_dir, force=force, log=log)
    manifest = {"command": "python -m fastpath_lib evidence", "out": str(out_dir), "budget_s": budget_s,
                "started": _now(), "python": sys.version.split()[0], "interpreter_opt_in": False,
                "budget_split": budget_split(budget_s, steps), "preflight": preflight,
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
            left = deadline - clock()
            budget = min(left, allot(left, steps[i:]))
            if interrupted:
                entry = {"name": step.name, "title": step.title, "status": "skipped",
                         "why": "the run was interrupted", "seconds": 0.0}
            elif budget < step.min_s:
                entry = {"name": step.name, "title": step.title, "status": "skipped", "seconds": 0.0,
                         "why": f"the run's budget ran out ({max(left, 0):.0f} s left of {budget_s:.0f} s, the step "
                                f"needs {step.min_s:.0f} s)"}
            else:
                log(f"evidence [{i + 1}/{len(steps)}] {step.name}: {step.title} (budget {budget:.0f} s)")
                try:
                    entry = runner(step, staging, budget)
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
    missing = manifest_gaps(manifest)
    manifest.update(finished=_now(), seconds=round(clock() - start, 1), failed=failed, exit_status=status,
                    counts={k: sum(s["status"] == k for s in manifest["steps"]) for k in STATUSES},
                    complete=not missing, missing=missing)
    _write_json(staging / "manifest.json", manifest)
    folder = results.finish(staging, out_dir, force=force, missing=missing)
    if missing:
        log(f"evidence: PARTIAL: {folder} stays marked {INCOMPLETE_MARKER}; missing: " + "; ".join(missing))
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
    """Print the plan (each step's minimum, expected seconds and where that figure comes from, its nominal budget),
    whether it fits ``budget_s`` with the preflight, the steps left out by default, and check the imports and the test
    collection; 0 when the plan fits and everything is in place."""
    import fastpath_lib.bench.evidence_steps as evidence_steps
    from fastpath_lib import runtime
    from fastpath_lib.bench.preflight import PREFLIGHT_EST_S, PREFLIGHT_S

    out(f"evidence plan: {len(steps)} steps within {budget_s:.0f} s, after a preflight of at most {PREFLIGHT_S:.0f} s "
        "(counted in the budget). Each step starts with its minimum plus its weight's share of what is left over; a "
        "step that overruns is cut and recorded; one that stops early is 'partial'")
    width = max([15, *(len(s.name) for s in steps)])
    out(f"  {'':>3} {'step':<{width}} {'min':>5} {'expect':>6} {'budget':>6}")
    for i, (s, b) in enumerate(plan(budget_s - PREFLIGHT_S, steps), 1):
        est = f"{s.est_s:5.0f} s" if s.est_s is not None else "    ?  "
        out(f"  {i:>2}. {s.name:<{width}} {s.min_s:3.0f} s {est} {b:4.0f} s  {s.title}")
        out(f"      writes: {', '.join(s.writes) or '-'}")
        if s.basis:
            out(f"      cost: {s.basis}")
    ok, line = fits(budget_s, steps, PREFLIGHT_S, PREFLIGHT_EST_S)
    out(f"budget: {line}")
    out("budget split (manifest.json's budget_split): " + "; ".join(
        f"{op} {e['share']:.0%} ({e['nominal_s']:.0f} s)"
        for op, e in budget_split(budget_s - PREFLIGHT_S, steps).items()))
    from fastpath_lib import opspec
    from fastpath_lib.bench.note_evidence import steps_skipping

    for name in opspec.names():  # what each per-op step will do with each op, from its spec's fields
        spec = opspec.get(name)
        skips = steps_skipping(spec)
        out(f"op {name}: " + ("every per-op step runs it" if not skips else
                              "; ".join(f"step {step} skips it: {why}" for step, why in skips.items()))
            + ("" if "sweep" in skips else f"; {sweep_line(spec)}"))
    left_out = [n for n in OPTIONAL if n not in {s.name for s in steps}]
    for n in left_out:
        out(f"left out by default: {n}: {OPTIONAL[n][1]}")
    out(f"here: {runtime.describe()}")
    out("CUDA: " + ("present: `evidence --out DIR` would run the preflight, then the plan" if runtime.cuda_available()
                    else "absent: `evidence --out DIR` refuses in its preflight (exit 2) and writes nothing"))
    if any(s.name == "sanitizer" for s in steps):
        tool = evidence_steps.find_sanitizer()
        out(f"compute-sanitizer: {tool or 'not found (the sanitizer step will be skipped and say so)'}")
    problems = _check_imports(steps)
    if not ok:
        problems.append(f"the plan does not fit its budget: {line}")
    if collect:
        ok_c, line_c = evidence_steps.collect_tests()
        out(f"test collection: {line_c}")
        if not ok_c:
            problems.append(f"the tests do not collect: {line_c}")
    for p in problems:
        out(f"PROBLEM: {p}")
    out("dry run: " + ("the plan fits and everything the steps need imports" if not problems
                       else f"{len(problems)} problem(s)"))
    return 0 if not problems else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m fastpath_lib evidence --out DIR [--budget-s 420] [--with sanitizer] [--op MODULE:SPEC] [--dry-run]
    [--force]``."""
    p = argparse.ArgumentParser(prog="python -m fastpath_lib evidence", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="the folder to write (must not exist unless --force)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help=f"the whole run's time budget in seconds, preflight included (default {DEFAULT_BUDGET_S:.0f})")
    p.add_argument("--with", dest="with_", action="append", default=[], choices=sorted(OPTIONAL),
                   help="add a step left out of the default plan (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and check imports; runs anywhere")
    p.add_argument("--force", action="store_true", help="replace an existing folder")
    p.add_argument("--op", action="append", default=[], metavar="MODULE:SPEC",
                   help="also run an operator: a registered name or MODULE:ATTRIBUTE naming an OpSpec (repeatable; "
                        "every step's process registers it too)")
    args = p.parse_args(argv)
    if args.budget_s <= 0:
        print("error: --budget-s must be positive", file=sys.stderr)
        return 2
    from fastpath_lib import opspec

    for ref in args.op:
        try:
            opspec.load(ref)
        except (ImportError, AttributeError, KeyError, ValueError, TypeError) as exc:
            print(f"error: --op {ref}: {exc}", file=sys.stderr)
            return 2
        if ":" in ref:  # every step's process (a child) reads it and registers the op itself
            opspec.export(ref)
    steps = all_steps(tuple(args.with_))
    if args.dry_run:
        return dry_run(args.budget_s, steps)
    if not args.out:
        print("error: --out DIR is required (or --dry-run)", file=sys.stderr)
        return 2
    if Path(args.out).exists() and not args.force:
        print(f"error: {args.out} already exists; pass --force to replace it, or choose another folder",
              file=sys.stderr)
        return 2
    from fastpath_lib.bench.preflight import PREFLIGHT_S, preflight, refusal

    start = time.monotonic()
    ok, checks = preflight(args.budget_s, steps, timeout=PREFLIGHT_S)
    if not ok:
        print(refusal(checks), file=sys.stderr)
        return 2
    for c in checks:
        print(f"preflight {c['check']}: {c['detail']}", file=sys.stderr)
    status, _ = run_evidence(args.out, budget_s=args.budget_s - (time.monotonic() - start), steps=steps,
                             force=args.force, preflight=checks)
    return status


if __name__ == "__main__":
    sys.exit(main())
