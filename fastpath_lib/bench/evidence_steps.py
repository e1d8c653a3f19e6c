"""The evidence run's steps, each run in its own process by :mod:`fastpath_lib.bench.evidence` (through
:mod:`~fastpath_lib.bench.step_process`, which defines :class:`StepContext`).

A step is a function taking a :class:`StepContext` and returning ``None`` (it ran) or a dict ``{"status": "ran" |
"skipped" | "failed", "why": ..., "details": {...}}``; an exception means it failed. Each writes its files into the
run's staging folder (``ctx.out``) as soon as it has them, so a later cut keeps what finished. A step of one job
(matrix, sweep, replay, compile cost, compiled facts) is one function for every registered operator: it reads the op
from ``ctx.op`` and its spec from the registry, and writes RMSNorm's files at the top of the folder, any other op's
under ``ops/NAME/``.
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
from fastpath_lib.bench.step_process import StepContext, child_main  # noqa: F401 - a step's context and process
from fastpath_lib import runtime
from fastpath_lib.runtime import ROOT, child_env, stop_process_group

__all__ = ["StepContext", "child_main", "find_sanitizer", "collect_tests", "CORE_TESTS", "PRIMARY", "selftest",
           "gpu_tests", "core_tests", "sanitizer", "copy_bandwidth", "matrix", "host", "sweep", "replay", "compile_cost",
           "compiled_facts", "pr_note"]

#: The operator whose files sit at the top of the evidence folder (each other op's under ``ops/NAME/``).
PRIMARY = "rms_norm"

#: The core tests the evidence run repeats on CUDA (those present in the checkout).
CORE_TESTS = ("tests/test_predicate.py", "tests/test_boundaries.py", "tests/test_contract.py",
              "tests/test_contract_modes.py", "tests/test_hypothesis.py")


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
    if stopped:
        why += f"; stopped at the time budget ({pytest_deadline.REASON}): the remaining tests did not run"
    clean = counts is not None and not counts["failures"] and not counts["errors"]
    ok = rc == 0 or (stopped and rc == 2 and clean)  # pytest reports a stopped session as interrupted (2)
    return {"status": "ran" if ok else "failed", "why": why, "details": counts}


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
    found = shutil.which("compute-sanitizer")
    if found:
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


def copy_bandwidth(ctx: StepContext):
    """The device-to-device copy bandwidth, the ceiling the matrix reports % of."""
    from fastpath_lib.bench.timing import copy_bandwidth as measure

    gbps, label = measure("cuda")
    ctx.write_json("copy_bandwidth.json", {"gbps": gbps, "label": label})
    return {"status": "ran", "why": f"{label}: {gbps:.0f} GB/s"}


def _copy(ctx: StepContext):
    """``(GB/s, label)`` of the run's copy bandwidth: the copy step's, or measured here (and kept for the next op's
    matrix) when that step did not run, so no matrix row lacks its % of the ceiling."""
    f = ctx.out / "copy_bandwidth.json"
    if not f.exists():
        from fastpath_lib.bench.timing import copy_bandwidth as measure

        gbps, label = measure("cuda" if runtime.cuda_available() else "cpu")
        ctx.write_json("copy_bandwidth.json", {"gbps": gbps, "label": label})
    d = json.loads(f.read_text())
    return d["gbps"], d["label"]


def _spec(ctx: StepContext):
    """The operator the step serves (``ctx.op``; RMSNorm when none is named)."""
    from fastpath_lib import opspec

    return opspec.get(ctx.op or PRIMARY)


def _home(ctx: StepContext, spec) -> tuple[Path, str]:
    """Where ``spec``'s files go and their names' prefix: the staging folder itself for RMSNorm, ``ops/NAME/``
    (created) for any other op."""
    if spec.name == PRIMARY:
        return ctx.out, ""
    return _op_folder(ctx, spec.name), f"ops/{spec.name}/"


def _named(spec, why) -> str:
    return why if spec.name == PRIMARY else f"{spec.name}: {why}"


def matrix(ctx: StepContext):
    """An operator's predeclared matrix (``ctx.op``) against its baselines on the generic runner, ``results.csv``
    rewritten after every case: RMSNorm's into the staging folder, any other op's into ``ops/NAME/``."""
    from fastpath_lib.bench import results
    from fastpath_lib.bench.analysis import coverage_line
    from fastpath_lib.bench.opbench import run_op

    spec = _spec(ctx)
    folder, prefix = _home(ctx, spec)
    df = run_op(spec, quick=False, deadline=ctx.deadline, log=ctx.log, copy=_copy(ctx), folder=folder)
    env = dict(df.attrs["environment"], evidence_run=True)
    if (df.status == "ok").any():
        results.write(folder, df, env)  # the table, the environment, the boundary plot and table
    else:  # nothing was timed: no plot to draw
        results.write_table(folder, df)
        ctx.write_json(f"{prefix}environment.json", env)
    not_run = int((df.status == "not run").sum())
    return {"status": "ran", "why": _named(spec, coverage_line(df, env)) + (
        f"; {not_run} case/provider rows not run (time budget)" if not_run else "")}


def host(ctx: StepContext):
    """The host-overhead family of every registered operator (:func:`fastpath_lib.opspec.names`), after all their
    matrices: RMSNorm's rows appended to ``results.csv``, another op's to ``ops/NAME/results.csv``; each op's rows
    include vLLM's dispatch where the op is a vLLM IR op (:mod:`fastpath_lib.bench.vllmhost`)."""
    import pandas as pd

    import fastpath_lib.bench.results as results
    from fastpath_lib import opspec
    from fastpath_lib.bench.analysis import classify
    from fastpath_lib.bench.host import host_table
    from fastpath_lib.bench.metadata import environment
    from fastpath_lib.bench.ophost import measure_host_op
    from fastpath_lib.bench.vllmhost import vllm_table

    over, skipped = [], []
    for name in opspec.names():
        spec = opspec.get(name)
        ctx.log(f"{name}:")
        rows = pd.DataFrame(measure_host_op(spec, log=ctx.log))
        if not len(rows):
            skipped.append(name)
            continue
        folder = _home(ctx, spec)[0]
        csv = folder / "results.csv"
        results.write_table(folder, pd.concat([pd.read_csv(csv), rows], ignore_index=True) if csv.exists() else rows)
        if name == PRIMARY and not (ctx.out / "environment.json").exists():  # no matrix ran: name the declared
            from fastpath_lib.bench.matrix import load_cases

            env = environment()
            env["declared_cases"] = [c.id for c in load_cases()]
            ctx.write_json("environment.json", env)
        t = host_table(classify(rows))
        ctx.log(t.to_string())
        vt = vllm_table(rows)
        if len(vt):
            ctx.log(vt.to_string())
        over += [f"{name}: {c}" for c, r in t.iterrows() if r["verdict"] == "OVER"]
    why = "fallback host cost within the target" if not over else f"over the host-cost target: {', '.join(over)}"
    return {"status": "ran", "why": why + (f"; no host case declared: {', '.join(skipped)}" if skipped else "")}


def sweep(ctx: StepContext):
    """An operator's row sweep (``ctx.op``): its fast route against its first baseline across row counts, and the
    proposal. RMSNorm's is the full sweep (its proposal is what ``thresholds.json`` records); another op's is the quick
    sweep (fewer points, one width: its share of the budget is small, and an op with its own case class builds its
    inputs on the host), into ``ops/NAME/``."""
    from fastpath_lib import opspec
    from fastpath_lib.bench.sweep import threshold_sweep

    spec = _spec(ctx)
    if spec.name == PRIMARY:
        table = threshold_sweep(deadline=ctx.deadline)
    elif spec.fast is None:
        return {"status": "skipped", "why": f"{spec.name}: its fast route is {opspec.NOT_DECLARED}"}
    else:
        table = threshold_sweep(spec=spec, quick=True, deadline=ctx.deadline)
    folder, prefix = _home(ctx, spec)
    table.to_csv(folder / "threshold.csv", index=False)
    proposal = table.attrs["proposal"]
    ctx.write_json(f"{prefix}threshold_proposal.json", proposal)
    return {"status": "ran", "why": _named(spec, proposal.get("line") or proposal.get("reason")), "details": proposal}


def replay(ctx: StepContext):
    """An operator's workload replay (``ctx.op``): RMSNorm's small decoder with its norm modules swapped; another op's
    serving trace weighted by call counts and the small decoder with every norm done by its ``decoder_step``, both
    quick (its share of the budget is small), into ``ops/NAME/replay.json``."""
    from fastpath_lib.bench.workload import replay as run

    spec = _spec(ctx)
    if spec.name == PRIMARY:
        res = run()
        ctx.write_json("replay.json", res)
        return {"status": "ran", "why": f"logits agree: {res.get('logits_close')}"}
    from fastpath_lib.bench.trace import replay_trace, serving_trace

    res = run(spec=spec, quick=True)
    table = replay_trace(serving_trace(spec=spec), spec=spec, quick=True)
    res["trace"] = {"rows": table.to_dict("records"), "totals": table.attrs["totals"]}
    ctx.write_json(f"{_home(ctx, spec)[1]}replay.json", res)
    decoder = f"logits agree: {res['logits_close']}" if "logits_close" in res else res["note"]
    return {"status": "ran", "why": f"{spec.name}: {decoder}; trace: {table.attrs['totals']['measured_calls']} of "
                                    f"{table.attrs['totals']['calls']} calls measured"}


def compile_cost(ctx: StepContext):
    """Compile time per kernel specialization of an operator (``ctx.op``; RMSNorm's over its whole matrix, backward
    included) in a fresh process with an empty cache."""
    from fastpath_lib.bench.workload import compile_cost as run

    spec = _spec(ctx)
    res = run(spec=None if spec.name == PRIMARY else spec, timeout=max(5.0, ctx.left()))
    if res.get("declared") is False:
        return {"status": "skipped", "why": _named(spec, res["note"])}
    ctx.write_json(f"{_home(ctx, spec)[1]}compile_cost.json", res)
    if res.get("error"):
        last = (res["error"].strip().splitlines() or [""])[-1]
        return {"status": "failed", "why": _named(spec, f"the compile probe failed: {last}")}
    return {"status": "ran", "why": _named(spec, f"{res['specializations']} specializations")}


def compiled_facts(ctx: StepContext):
    """Facts read from an operator's compiled kernels (vector width, registers, spills), compiled for their GPU
    targets: RMSNorm's for the matrix's widths on sm_80, sm_90 and this GPU's architecture, another op's for its
    spec's ``kernels``."""
    from fastpath_lib.rmsnorm import compiled

    spec = _spec(ctx)
    workers = max(1, (os.cpu_count() or 2) - 1)
    if spec.name == PRIMARY:
        from fastpath_lib.bench.workload import compiled_facts as facts

        res = facts(timeout=max(5.0, ctx.left()), workers=workers)
        if res.get("skipped"):
            return {"status": "skipped", "why": res["skipped"]}
        rows, archs = res["rows"], res["archs"]
    else:
        if spec.kernels is None:
            return {"status": "skipped", "why": f"{spec.name} names no kernels to compile"}
        why = compiled.missing_tools()
        if why:
            return {"status": "skipped", "why": why}
        builds = spec.kernels()
        rows = compiled.facts(builds, timeout=max(5.0, ctx.left()), workers=workers)
        for b, r in zip(builds, rows):
            r["label"] = b.label
        archs = sorted({r["arch"] for r in rows})
    ctx.write_json(f"{_home(ctx, spec)[1]}compiled.json", rows)
    spills = sum(1 for r in rows if r.get("spills"))
    return {"status": "ran", "why": _named(spec, f"{len(rows)} specializations for {', '.join(archs)}, "
                                                 f"{spills} of them spill")}


def _op_folder(ctx: StepContext, name: str) -> Path:
    """``ops/NAME/`` of the staging folder, where a registered operator's steps write (created)."""
    folder = ctx.out / "ops" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder




def pr_note(ctx: StepContext):
    """The PR note, from this folder (and the manifest so far)."""
    from fastpath_lib.bench.report import pr_note as draft

    if not (ctx.out / "results.csv").exists():
        return {"status": "failed", "why": "no results.csv: the matrix step did not write any"}
    (ctx.out / "pr_note.md").write_text(draft(ctx.out, allow_incomplete=True))
    return {"status": "ran"}


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
