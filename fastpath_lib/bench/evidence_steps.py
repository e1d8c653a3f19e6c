"""The evidence run's steps, each run in its own process by :mod:`fastpath_lib.bench.evidence` (through
:mod:`~fastpath_lib.bench.step_process`, which defines :class:`StepContext`).

A step is a function taking a :class:`StepContext` and returning ``None`` (it ran) or a dict ``{"status": "ran" |
"partial" | "skipped" | "failed", "why": ..., "details": {...}}``; an exception means it failed. "partial" is a step
that stopped early at its deadline: its details say what it collected and what it ran. Each writes its files into the
run's staging folder (``ctx.out``) as soon as it has them, so a later cut keeps what finished. A step of one job
(matrix, sweep, replay, compile cost, compiled facts, compiled baselines) is one function for every registered
operator: it reads the op(s) from ``ctx.op`` (a job's step serves every op in one process, :func:`_each_op`; the
matrix is a step per op) and their specs from the registry, and writes the default op's files (the first registered)
at the top of the folder, any other op's under ``ops/NAME/``. A step whose op's spec leaves out a field it needs is
skipped for that op, the field named (:data:`fastpath_lib.opspec.NOT_DECLARED`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import fastpath_lib.bench.pytest_deadline as pytest_deadline
from fastpath_lib import runtime
from fastpath_lib.bench.step_process import StepContext, child_main  # noqa: F401 - a step's context and process
from fastpath_lib.runtime import ROOT, child_env

__all__ = ["StepContext", "child_main", "find_sanitizer", "collect_tests", "CORE_TESTS", "primary", "selftest",
           "gpu_tests", "core_tests", "sanitizer", "matrix", "host", "sweep", "replay", "compile_cost",
           "compiled_facts", "compiled_baselines", "pr_note", "STATUSES"]

def primary() -> str:
    """The operator whose files sit at the top of the evidence folder: the default op, the first registered (each
    other op's under ``ops/NAME/``)."""
    from fastpath_lib import opspec
    return opspec.names()[0]

#: The core tests the evidence run repeats on CUDA (those present in the checkout).
CORE_TESTS = ("tests/rmsnorm/test_predicate.py", "tests/test_boundaries.py", "tests/rmsnorm/test_contract.py",
              "tests/rmsnorm/test_contract_modes.py", "tests/rmsnorm/test_hypothesis.py")


# --- steps ----------------------------------------------------------------------------------------------------------

def selftest(ctx: StepContext):
    """The kernels on CUDA against the float64 reference (no interpreter)."""
    from fastpath_lib import runtime
    from fastpath_lib import selftest as st

    if runtime.interpreter_enabled():
        return {"status": "failed", "why": "TRITON_INTERPRET is set: this would test the interpreter, not the GPU"}
    res = st.run()
    (ctx.out / "selftest.txt").write_text(f"{runtime.describe()}\n{res}\n")
    ctx.log(str(res))
    return {"status": "ran" if res.ok else "failed", "why": "" if res.ok else "; ".join(res.problems)[:500]}


def _pytest_command(args: list[str]) -> list[str]:
    """The pytest command line of a test step (its deadline plugin included); the dry run collects with it too."""
    return [sys.executable, "-m", "pytest", *args, "-q", "-rfEs", "-p", "no:cacheprovider", "-p",
            "fastpath_lib.bench.pytest_deadline"]


def _pytest(ctx: StepContext, name: str, args: list[str]):
    from fastpath_lib.bench.report import junit_counts

    xml = ctx.out / "tests" / f"{name}.xml"
    xml.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*_pytest_command(args), f"--junitxml={xml}"]
    # pytest stops between tests at the soft deadline and still writes its JUnit XML; the hard limit is a backstop
    env = child_env(**{pytest_deadline.ENV: f"{time.time() + max(1.0, ctx.left() - 15):.0f}"})
    rc, text = ctx.run(cmd, f"tests/{name}.txt", timeout=ctx.left(), env=env)
    if rc is None:
        return {"status": "failed", "why": f"pytest stopped at the step's deadline (see tests/{name}.txt)"}
    if rc == 5:
        return {"status": "skipped", "why": "no tests collected"}
    counts = junit_counts(xml) if xml.exists() else None
    why = ", ".join(f"{k} {v}" for k, v in counts.items()) if counts else f"pytest exit status {rc}"
    stopped = pytest_deadline.REASON in text
    m = re.search(pytest_deadline.COLLECTED_LINE.replace("{n}", r"(\d+)"), text)
    details = dict(counts or {}, collected=int(m.group(1)) if m else None, run=counts["tests"] if counts else None)
    if stopped:
        why += (f"; stopped at the time budget ({pytest_deadline.REASON}): ran {details['run']} of "
                f"{details['collected']} collected, the rest did not run")
    if counts is None or counts["failures"] or counts["errors"]:
        return {"status": "failed", "why": why, "details": details}
    if stopped or (details["collected"] is not None and counts["tests"] < details["collected"]):
        return {"status": "partial", "why": why, "details": details}  # pytest reports a stopped session as 2
    return {"status": "ran" if rc == 0 else "failed", "why": why, "details": details}


#: The gpu step's pytest arguments: every test marked ``gpu`` under ``tests/``.
GPU_TEST_ARGS = ("-m", "gpu", "tests")


def _core_test_args(root: Path) -> list[str] | None:
    files = [f for f in CORE_TESTS if (root / f).exists()]
    return ["-m", "not gpu and not slow and not browser", *files] if files else None


def gpu_tests(ctx: StepContext):
    """``pytest -m gpu tests``."""
    return _pytest(ctx, "gpu", list(GPU_TEST_ARGS))


def core_tests(ctx: StepContext):
    """The core tests on CUDA (predicate, boundaries, contract, modes, hypothesis)."""
    args = _core_test_args(ctx.root)
    if args is None:
        return {"status": "skipped", "why": "no core test files in this checkout"}
    return _pytest(ctx, "core", args)


def find_sanitizer() -> str | None:
    """``compute-sanitizer`` on PATH, in ``$CUDA_HOME/bin`` or ``/usr/local/cuda/bin``; ``None`` when absent."""
    if found := shutil.which("compute-sanitizer"):
        return found
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if base and (Path(base) / "bin" / "compute-sanitizer").is_file():
            return str(Path(base) / "bin" / "compute-sanitizer")
    return None


def sanitizer(ctx: StepContext):
    """``compute-sanitizer --tool memcheck`` over the boundary shapes; its absence or refusal is recorded."""
    tool = find_sanitizer()
    if tool is None:
        return {"status": "skipped", "why": "compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"}
    script = ctx.root / "tools" / "sanitize_boundaries.py"
    limit = ctx.left()
    cmd = [tool, "--tool", "memcheck", "--report-api-errors", "no", "--error-exitcode", "99", sys.executable,
           str(script), "--stop-at", f"{time.time() + max(5.0, limit - 20):.0f}"]
    # every tensor its own allocation, so memcheck sees an access past a tensor's end
    rc, text = ctx.run(cmd, "sanitizer/memcheck.txt", timeout=limit,
                       env=child_env(PYTORCH_NO_CUDA_MEMORY_CACHING="1"))
    m = re.search(r"ERROR SUMMARY: (\d+) error", text)
    launched = re.search(r"(\d+) boundary points launched.*", text)
    details = {"errors": int(m.group(1)) if m else None, "summary": launched.group(0) if launched else None}
    if rc is None:
        return {"status": "failed", "why": "memcheck stopped at the step's deadline", "details": details}
    if m is None:
        last = text.strip().splitlines()[-1:] or [""]
        return {"status": "skipped", "why": f"compute-sanitizer refused to run (exit {rc}): {last[0][:300]}",
                "details": details}
    if launched and launched.group(1) == "0":
        return {"status": "failed", "why": "no boundary point was launched within the budget", "details": details}
    if int(m.group(1)) or rc == 99:
        return {"status": "failed", "why": f"memcheck reported {m.group(1)} errors", "details": details}
    if rc != 0:
        return {"status": "failed", "why": f"boundary outputs differ from the reference (exit {rc})",
                "details": details}
    return {"status": "ran", "why": f"no memcheck errors; {details['summary'] or ''}".strip("; "),
            "details": details}


def _copy(ctx: StepContext):
    """``(GB/s, label)`` of the run's copy bandwidth: measured by the first matrix step of the run and kept in
    ``copy_bandwidth.json`` for the next op's matrix, so no matrix row lacks its % of the ceiling."""
    f = ctx.out / "copy_bandwidth.json"
    if not f.exists():
        from fastpath_lib.bench.opbench import device_name
        from fastpath_lib.bench.timing import copy_bandwidth as measure

        gbps, label = measure("cuda" if runtime.cuda_available() else "cpu")
        ctx.write_json("copy_bandwidth.json", {"gbps": gbps, "label": label, "device_name": device_name()})
    d = json.loads(f.read_text())
    return d["gbps"], d["label"]


def _spec(ctx: StepContext):
    """The operator the step serves (``ctx.op``; the default op when none is named)."""
    from fastpath_lib import opspec

    return opspec.get(ctx.op or primary())


def _home(ctx: StepContext, spec) -> tuple[Path, str]:
    """Where ``spec``'s files go and their names' prefix: the staging folder itself for the default op,
    ``ops/NAME/`` (created) for any other op."""
    if spec.name == primary():
        return ctx.out, ""
    return _op_folder(ctx, spec.name), f"ops/{spec.name}/"


def _named(spec, why) -> str:
    return why if spec.name == primary() else f"{spec.name}: {why}"


#: Step statuses from best to worst: a step of several ops reports the worst of its parts.
STATUSES = ("ran", "skipped", "partial", "failed")


def _each_op(ctx: StepContext, part) -> dict:
    """Run ``part(spec, deadline)`` for every op the step serves (``ctx.ops``, the default op when none), each with an
    equal share of the time still left, one op's exception recorded without losing the others'; the step's status is
    the worst of the parts (:data:`STATUSES`), its ``why`` theirs joined, its ``details`` per op."""
    import traceback

    from fastpath_lib import opspec

    names = ctx.ops or (primary(),)
    parts = {}
    for i, name in enumerate(names):
        share = (ctx.deadline - time.monotonic()) / (len(names) - i)
        deadline = time.monotonic() + share
        spec = opspec.get(name)
        try:
            res = part(spec, deadline) or {"status": "ran"}
        except Exception as exc:  # noqa: BLE001 - one op's failure is recorded, the next op still runs
            traceback.print_exc()
            res = {"status": "failed", "why": _named(spec, f"{type(exc).__name__}: {exc}"[:400])}
        parts[name] = res
    worst = max((r.get("status", "ran") for r in parts.values()), key=STATUSES.index)
    return {"status": worst, "why": "; ".join(r.get("why", "") for r in parts.values() if r.get("why")),
            "details": {n: r.get("details") for n, r in parts.items()}}


def matrix(ctx: StepContext):
    """An operator's predeclared matrix (``ctx.op``) against its baselines (``torch.compile`` left to the
    compiled-baselines step) on the generic runner, ``results.csv`` rewritten after every case: the default op's into
    the staging folder, any other op's into ``ops/NAME/``. "partial" when the deadline left cases not run."""
    from fastpath_lib.bench import results
    from fastpath_lib.bench.analysis import coverage_line
    from fastpath_lib.bench.opbench import run_op

    spec = _spec(ctx)
    folder, prefix = _home(ctx, spec)
    _smi(ctx, "matrix", "before")
    df = run_op(spec, quick=False, deadline=ctx.deadline, log=ctx.log, copy=_copy(ctx), folder=folder, compiled=False)
    _smi(ctx, "matrix", "after")
    env = dict(df.attrs["environment"], evidence_run=True)
    if (df.status == "ok").any():
        results.write(folder, df, env)  # the table, the environment, the boundary plot and table
    else:  # nothing was timed: no plot to draw
        results.write_table(folder, df)
        ctx.write_json(f"{prefix}environment.json", env)
    declared = list(dict.fromkeys(df.case_id))
    not_run = sorted(set(df[df.status == "not run"].case_id))
    details = {"collected": len(declared), "run": len(declared) - len(not_run), "not_run": not_run}
    why = _named(spec, coverage_line(df, env))
    if not_run:
        return {"status": "partial", "why": f"{why}; {len(not_run)} of {len(declared)} cases not run (time budget)",
                "details": details}
    return {"status": "ran", "why": why, "details": details}


def _smi(ctx: StepContext, step: str, when: str) -> None:
    """Append ``nvidia-smi``'s state of the GPU (clocks, power, temperature, throttle reasons, MIG, ECC) to
    ``nvidia_smi.json`` under this step and ``when`` (before / after); nvidia-smi's absence is recorded too."""
    from fastpath_lib.bench.metadata import gpu_state

    f = ctx.out / "nvidia_smi.json"
    data = json.loads(f.read_text()) if f.exists() else {}
    data.setdefault(f"{step}{'@' + ctx.op if ctx.op and ctx.op != primary() else ''}", {})[when] = gpu_state()
    ctx.write_json("nvidia_smi.json", data)


def host(ctx: StepContext):
    """The host-overhead family of every registered operator (:func:`fastpath_lib.opspec.names`), after all their
    matrices: the default op's rows appended to ``results.csv``, another op's to ``ops/NAME/results.csv``; each op's
    rows include vLLM's dispatch where its spec names the vLLM IR op it provides (:mod:`fastpath_lib.bench.vllmhost`),
    every op's timed in one child process (each start imports vLLM: seconds)."""
    import pandas as pd

    import fastpath_lib.bench.results as results
    from fastpath_lib import opspec
    from fastpath_lib.bench.analysis import classify
    from fastpath_lib.bench.host import host_table, over_and_unresolved
    from fastpath_lib.bench.metadata import environment
    from fastpath_lib.bench.ophost import measure_host_op
    from fastpath_lib.bench.vllmhost import case_ids, measure_vllm_host, vllm_ops, vllm_table

    over, unsure, skipped = [], [], []
    _smi(ctx, "host", "before")
    # the quick blocks (100 of 50 calls, hostmethod's measured-stable setting): a quarter of the full run's calls
    ir_ops = vllm_ops()
    timed = measure_vllm_host(list(ir_ops), quick=True, log=ctx.log)  # [] where no op names a vLLM IR op
    for name in opspec.names():
        spec = opspec.get(name)
        ctx.log(f"{name}:")
        theirs = case_ids(ir_ops[name]) if name in ir_ops else set()
        rows = pd.DataFrame(measure_host_op(spec, quick=True, log=ctx.log, vllm=False)
                            + [r for r in timed if r["case_id"] in theirs])
        if not len(rows):
            skipped.append(name)
            continue
        folder = _home(ctx, spec)[0]
        csv = folder / "results.csv"
        results.write_table(folder, pd.concat([pd.read_csv(csv), rows], ignore_index=True) if csv.exists() else rows)
        if name == primary() and not (ctx.out / "environment.json").exists():  # no matrix ran: name the declared
            env = environment()
            env["declared_cases"] = [c.id for c in spec.matrix()]
            ctx.write_json("environment.json", env)
        t = host_table(classify(rows), spec)
        ctx.log(t.to_string())
        vt = vllm_table(rows)
        if len(vt):
            ctx.log(vt.to_string())
        said = over_and_unresolved(t)
        over, unsure = over + [f"{name}: {c}" for c in said[0]], unsure + [f"{name}: {c}" for c in said[1]]
    _smi(ctx, "host", "after")
    why = f"over the host-cost target: {', '.join(over)}" if over else "no fallback case over the host-cost target"
    why += f"; not resolved by this run (run it again): {', '.join(unsure)}" if unsure else ""
    return {"status": "ran", "why": why + (f"; no host case declared: {', '.join(skipped)}" if skipped else "")}


def sweep(ctx: StepContext):
    """Every op's row sweep (``ctx.ops``): its dispatched call against its first baseline across row counts and
    every admitted dtype, host time included (:func:`fastpath_lib.bench.sweep.threshold_sweep`), and the proposal.
    An op whose spec records its threshold (``OpSpec.thresholds``) gets the full sweep (its proposal is what that
    record keeps); another op the quick sweep. "partial" when the deadline cut a sweep short (no threshold is proposed
    from it)."""
    from fastpath_lib import opspec
    from fastpath_lib.bench.sweep import threshold_sweep

    _smi(ctx, "sweep", "before")

    def one(spec, deadline):
        if spec.fast is None:
            return {"status": "skipped", "why": f"{spec.name}: its fast route (OpSpec.fast) is {opspec.NOT_DECLARED}"}
        table = threshold_sweep(spec=spec, quick=spec.thresholds is None, deadline=deadline)
        folder, prefix = _home(ctx, spec)
        table.to_csv(folder / "threshold.csv", index=False)
        proposal = table.attrs["proposal"]
        ctx.write_json(f"{prefix}threshold_proposal.json", proposal)
        why = _named(spec, proposal.get("line") or proposal.get("reason"))
        if not proposal.get("complete", True):
            return {"status": "partial", "why": f"{why} ({proposal.get('points_run')} of "
                                                f"{proposal.get('points_planned')} points run)", "details": proposal}
        return {"status": "ran", "why": why, "details": proposal}

    res = _each_op(ctx, one)
    _smi(ctx, "sweep", "after")
    return res


def replay(ctx: StepContext):
    """Every op's workload replay (``ctx.ops``) where its spec declares where the op sits in a decoder
    (``OpSpec.decoder_step``): the small decoder with every norm done by that step
    (:func:`fastpath_lib.bench.workload.replay`) and the serving trace weighted by call counts
    (:func:`fastpath_lib.bench.trace.serving_trace`, quick), into its ``replay.json``; an op whose spec leaves the
    field out is skipped with the field named."""
    from fastpath_lib.bench.trace import replay_trace, serving_trace
    from fastpath_lib.bench.workload import replay as run

    _smi(ctx, "replay", "before")

    def one(spec, deadline):
        res = run(spec=spec)
        if res.get("declared") is False:
            return {"status": "skipped", "why": f"{spec.name}: {res['note']}"}
        table = replay_trace(serving_trace(spec=spec), spec=spec, quick=True)
        res["trace"] = {"rows": table.to_dict("records"), "totals": table.attrs["totals"]}
        ctx.write_json(f"{_home(ctx, spec)[1]}replay.json", res)
        return {"status": "ran", "why": f"{spec.name}: logits agree: {res['logits_close']}; trace: "
                                        f"{table.attrs['totals']['measured_calls']} of "
                                        f"{table.attrs['totals']['calls']} calls measured"}

    res = _each_op(ctx, one)
    _smi(ctx, "replay", "after")
    return res


def compile_cost(ctx: StepContext):
    """Every op's compile time per kernel specialization (``ctx.ops``) where its spec declares the binaries its fast
    route compiles (``OpSpec.specialization``; backward binaries where it declares ``fast_backward`` too), over its
    whole matrix, in a fresh process with an empty cache; an op whose spec leaves the field out is skipped with the
    field named."""
    from fastpath_lib.bench.workload import compile_cost as run

    def one(spec, deadline):
        res = run(spec=spec, timeout=max(5.0, deadline - time.monotonic()))
        if res.get("declared") is False:
            return {"status": "skipped", "why": f"{spec.name}: {res['note']}"}
        ctx.write_json(f"{_home(ctx, spec)[1]}compile_cost.json", res)
        if res.get("error"):
            last = (res["error"].strip().splitlines() or [""])[-1]
            return {"status": "failed", "why": f"{spec.name}: the compile probe failed: {last}"}
        return {"status": "ran", "why": f"{spec.name}: {res['specializations']} specializations"}

    return _each_op(ctx, one)


def compiled_facts(ctx: StepContext):
    """Facts read from every op's compiled kernels (``ctx.ops``: vector width, registers, spills), compiled for their
    GPU targets by the op's ``compiler``: its spec's ``kernels`` for sm_80, sm_90 and this GPU's architecture."""
    from fastpath_lib.bench.workload import compiled_facts as facts

    workers = max(1, (os.cpu_count() or 2) - 1)

    def one(spec, deadline):
        res = facts(spec=spec, timeout=max(5.0, deadline - time.monotonic()), workers=workers)
        if res.get("skipped"):
            return {"status": "skipped", "why": _named(spec, res["skipped"])}
        rows, archs = res["rows"], res["archs"]
        ctx.write_json(f"{_home(ctx, spec)[1]}compiled.json", rows)
        spills = sum(1 for r in rows if r.get("spills"))
        return {"status": "ran", "why": _named(spec, f"{len(rows)} specializations for {', '.join(archs)}, "
                                                     f"{spills} of them spill")}

    return _each_op(ctx, one)


def compiled_baselines(ctx: StepContext):
    """``torch.compile`` of every op's composite (``ctx.ops``) on a few cases (:func:`fastpath_lib.bench.opbench.
    pick_compiled_cases`), each case's skipped ``compiled`` row of the op's results table replaced by the timed one;
    the deadline is checked before each cold compile. "partial" when some planned case was not started."""
    from fastpath_lib.bench.opbench import time_compiled

    _smi(ctx, "compiled_baselines", "before")

    def one(spec, deadline):
        folder = _home(ctx, spec)[0]
        if not (folder / "results.csv").exists():
            return {"status": "skipped", "why": _named(spec, "no results.csv: its matrix step wrote none")}
        res = time_compiled(spec, folder, deadline=deadline, log=ctx.log)
        if not res["planned"]:
            return {"status": "skipped", "why": _named(spec, "no torch.compile baseline declared")}
        details = {"collected": len(res["planned"]), "run": len(res["timed"]) + len(res["errors"]), **res}
        why = _named(spec, f"{len(res['timed'])} of {len(res['planned'])} cases compiled and timed"
                     + (f"; errors: {', '.join(res['errors'])}" if res["errors"] else "")
                     + (f"; not started (time budget): {', '.join(res['not_started'])}" if res["not_started"] else ""))
        status = "failed" if res["errors"] else "partial" if res["not_started"] else "ran"
        return {"status": status, "why": why, "details": details}

    res = _each_op(ctx, one)
    _smi(ctx, "compiled_baselines", "after")
    return res


def _op_folder(ctx: StepContext, name: str) -> Path:
    """``ops/NAME/`` of the staging folder, where a registered operator's steps write (created)."""
    folder = ctx.out / "ops" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pr_note(ctx: StepContext):
    """The PR note, from this folder (and the manifest so far); each other op whose matrix wrote its results gets its
    own beside them (``ops/NAME/pr_note.md``, the manifest read from this folder)."""
    import json

    from fastpath_lib import opspec
    from fastpath_lib.bench.report import pr_note as draft

    if not (ctx.out / "results.csv").exists():
        return {"status": "failed", "why": "no results.csv: the matrix step did not write any"}
    (ctx.out / "pr_note.md").write_text(draft(ctx.out, allow_incomplete=True))
    manifest = ctx.out / "manifest.json"
    manifest = json.loads(manifest.read_text()) if manifest.exists() else None
    drafted, missing, failed = [], [], []
    for name in opspec.names()[1:]:
        folder = ctx.out / "ops" / name
        if not (folder / "environment.json").exists():  # its matrix did not run (host rows alone make no note)
            missing.append(name)
            continue
        try:
            (folder / "pr_note.md").write_text(draft(folder, spec=name, manifest=manifest, allow_incomplete=True))
            drafted.append(f"ops/{name}/pr_note.md")
        except Exception as exc:  # noqa: BLE001 - one op's note failing keeps the others'
            failed.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
    why = "; ".join(part for part in ("also " + ", ".join(drafted) if drafted else "",
                                      f"no matrix results for {', '.join(missing)}: no note" if missing else "",
                                      "not drafted: " + " | ".join(failed) if failed else "") if part)
    return {"status": "partial" if failed else "ran", "why": why}


# --- dry-run helpers -----------------------------------------------------------------------------------------------

def collect_tests(timeout: float = 180, root: Path = ROOT) -> tuple[bool, str]:
    """Whether the test steps' own pytest commands collect here (``--collect-only``), and a one-line summary.

    Each of the two test steps (``gpu_tests``, ``core_tests``) is collected with the very arguments and plugins it
    runs with, so an import error anywhere under ``tests/`` (which ``-m gpu tests`` collects) shows in the dry run.
    """
    parts, ok = [], True
    for name, args in (("gpu_tests", list(GPU_TEST_ARGS)), ("core_tests", _core_test_args(root))):
        if args is None:
            parts.append(f"{name}: no test files")
            ok = False
            continue
        try:
            res = subprocess.run([*_pytest_command(args), "--collect-only"], cwd=root, env=child_env(),
                                 capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            parts.append(f"{name}: pytest --collect-only took over {timeout:.0f} s")
            ok = False
            continue
        found = re.findall(r"(\d+)(?:/\d+)? tests? (?:collected|selected)", res.stdout)
        lines = [ln for ln in res.stdout.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else res.stderr.strip()[-300:]
        if res.returncode == 0 and found:
            parts.append(f"{name}: {found[-1]} tests")
        else:
            parts.append(f"{name}: exit {res.returncode}: {last}")
            ok = False
    return ok, "; ".join(parts)
