"""The evidence command (issue 9 item 1), with the GPU steps simulated: manifest, time-boxing, partial results, dry
run, and the exit without CUDA that writes nothing. ``tests/bench/evidence_fakes.py`` holds the simulated steps; they
run in the same child processes the real steps do."""

from __future__ import annotations

import ast
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastpath_lib import runtime
from fastpath_lib.bench import evidence, evidence_steps
from fastpath_lib.bench.evidence import STEPS, Step, main, run_evidence
from fastpath_lib.bench.results import INCOMPLETE_MARKER

ROOT = runtime.ROOT


def fake(name, func, weight=1.0, **kw):
    return Step(name, f"simulated {func}", weight, f"tests.bench.evidence_fakes:{func}", **kw)


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def steps_by_name(m: dict) -> dict:
    return {s["name"]: s for s in m["steps"]}


def no_staging_left(parent: Path) -> bool:
    return not [p for p in parent.iterdir() if p.name.startswith(".")]


def test_plan_fits_its_budget_with_every_minimum_met_and_every_step_exists():
    names = [s.name for s in STEPS]
    assert names == ["selftest", "gpu_tests", "core_tests", "matrix", "sweep", "capture", "fused_add_rms_norm_matrix",
                     "replay", "compile_cost", "compiled", "host", "compiled_baselines", "pr_note"]
    assert max(i for i, n in enumerate(names) if n.endswith("matrix")) < names.index("host")  # after every matrix
    assert evidence.DEFAULT_BUDGET_S == 420
    from fastpath_lib.bench.preflight import PREFLIGHT_EST_S, PREFLIGHT_S

    ok, line = evidence.fits(420, STEPS, PREFLIGHT_S, PREFLIGHT_EST_S)
    assert ok, line
    expect = sum(s.est_s for s in STEPS) + PREFLIGHT_EST_S  # the minimums fit, the expected time does not: no fit
    ok, line = evidence.fits(expect - 1, STEPS, 0.0, PREFLIGHT_EST_S)
    assert sum(s.min_s for s in STEPS) <= expect - 1 and not ok and "expected time does NOT fit" in line, line
    for s in STEPS:  # a fixed minimum that covers a step's start, and where its expected cost comes from
        assert s.min_s >= evidence.START_S + 3 and s.est_s and s.basis.split(":")[0] in ("measured", "estimate"), s
        module, func = s.target.split(":")
        assert module.startswith("fastpath_lib.bench.") and callable(getattr(importlib.import_module(module), func))
    budgets = dict((s.name, b) for s, b in evidence.plan(420 - PREFLIGHT_S))
    assert sum(budgets.values()) == pytest.approx(420 - PREFLIGHT_S)
    assert all(budgets[s.name] >= s.min_s for s in STEPS)
    assert not evidence.fits(sum(s.min_s for s in STEPS) + PREFLIGHT_S - 1, STEPS, PREFLIGHT_S)[0]
    # the sanitizer is opt-in, and a plan with it says it needs a bigger budget
    assert "sanitizer" not in names and "sanitizer" in [s.name for s in evidence.all_steps(("sanitizer",))]
    assert not evidence.fits(420, evidence.all_steps(("sanitizer",)), PREFLIGHT_S)[0]
    split = evidence.budget_split(420)  # every registered op gets a share; manifest.json records it
    assert set(split) == {"shared", "rms_norm", "fused_add_rms_norm"} and "host" in split["shared"]["steps"]
    assert sum(e["nominal_s"] for e in split.values()) == pytest.approx(420, abs=0.5)
    assert "sweep" in split["fused_add_rms_norm"]["steps"] and "sweep" in split["rms_norm"]["steps"]


def test_each_step_starts_with_its_minimum_and_gets_its_expected_time_when_on_schedule():
    a, b, c = (Step(n, "", 1, "m:f", min_s=m, est_s=e) for n, m, e in (("a", 10, 20), ("b", 30, 30), ("c", 10, 50)))
    assert evidence.allot(200, (a, b, c)) == pytest.approx(20 + 100 * 20 / 100)  # on schedule: est + its surplus share
    assert evidence.allot(75, (a, b, c)) == pytest.approx(10 + 25 * 10 / 50)  # behind: min + share of what it lacks
    assert evidence.allot(40, (a, b, c)) == 10  # no slack: the minimum (the run loop skips it below that)
    assert [round(x) for _, x in evidence.plan(100, (a, b, c))] == [20, 30, 50]


def test_manifest_records_every_step_and_keeps_partial_results(tmp_path):
    out = tmp_path / "ev"
    steps = (fake("first", "ok"), fake("second", "skip"), fake("third", "boom"), fake("fourth", "ok_none"),
             fake("fifth", "crash"))
    status, folder = run_evidence(out, budget_s=120, steps=steps, log=lambda m: None)
    assert status == 1 and folder == out and out.is_dir() and no_staging_left(tmp_path)
    marker = (out / INCOMPLETE_MARKER).read_text()  # a failed or skipped step leaves the folder marked partial
    assert marker.startswith("partial") and "third: failed" in marker and "second: skipped" in marker
    m = manifest(out)
    s = steps_by_name(m)
    assert [x["name"] for x in m["steps"]] == ["first", "second", "third", "fourth", "fifth"]
    assert (s["first"]["status"], s["first"]["why"], s["first"]["outputs"]) == ("ran", "wrote a.txt", ["a.txt"])
    assert s["first"]["details"]["budget_s"] == pytest.approx(s["first"]["budget_s"], abs=0.1)
    assert (s["second"]["status"], s["second"]["why"]) == ("skipped", "simulated: tool absent")
    assert s["third"]["status"] == "failed" and "RuntimeError: simulated GPU failure" in s["third"]["why"]
    assert (out / "partial.txt").read_text() == "half of the work\n"  # kept although the step failed
    assert s["fourth"]["status"] == "ran" and s["fourth"]["outputs"] == ["sub/b.txt"]  # ran after a failure
    assert s["fifth"]["status"] == "failed" and "exited with status 3" in s["fifth"]["why"]
    assert "about to die" in (out / "logs" / "fifth.log").read_text()
    assert "simulated GPU failure" in (out / "logs" / "third.log").read_text()
    for x in m["steps"]:
        assert x["seconds"] >= 0 and x["budget_s"] > 0 and x["cut"] is False
    assert m["failed"] == ["third", "fifth"] and m["exit_status"] == 1
    assert m["counts"] == {"ran": 2, "skipped": 1, "partial": 0, "failed": 2}
    assert m["complete"] is False and len(m["missing"]) == 3
    assert m["budget_split"]["shared"]["steps"] == [x["name"] for x in m["steps"]]  # simulated steps serve no op


def test_a_step_that_overruns_is_cut_and_the_run_goes_on(tmp_path):
    out = tmp_path / "ev"
    steps = (fake("rows", "progressive", weight=1), fake("stuck", "hang", weight=1), fake("after", "ok", weight=2))
    t0 = time.monotonic()
    # 4 s a cut step and 8 s for the last: a step's process starts without importing torch (step_process), so even on
    # a busy machine a cut step has started and written rows; the cuts' grace comes out of the time left for the last
    status, _ = run_evidence(out, budget_s=16, steps=steps, log=lambda m: None)
    elapsed = time.monotonic() - t0
    s = steps_by_name(manifest(out))
    assert status == 1
    for name in ("rows", "stuck"):
        assert s[name]["status"] == "failed" and s[name]["cut"] is True and "cut: overran its budget" in s[name]["why"]
        assert s[name]["seconds"] < s[name]["budget_s"] + 3
    assert len(json.loads((out / "rows.json").read_text())) >= 3  # what it wrote before the cut is kept
    assert (out / "before_hang.txt").exists()
    assert s["after"]["status"] == "ran"
    assert elapsed < 16 + 2 * evidence._GRACE_S


def test_a_steps_process_imports_only_what_its_step_needs(tmp_path):
    """step_process is run by path with the standard library only: a simulated step's process never imports torch
    or the kit (a real step imports them itself), so starting a step costs a Python start-up, not a torch import."""
    out = tmp_path / "ev"
    status, _ = run_evidence(out, budget_s=30, steps=(fake("imports", "modules"),), log=lambda m: None)
    s = steps_by_name(manifest(out))["imports"]
    assert status == 0 and s["status"] == "ran", s
    assert s["details"]["loaded"] == {"torch": False, "fastpath_lib": False, "tests.bench.evidence_fakes": True}, s
    tree = ast.parse((ROOT / "fastpath_lib" / "bench" / "step_process.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__", "fastpath_lib"}, imported
    top = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names]
    top += [n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert not [m for m in top if m.startswith("fastpath_lib")], "step_process imports the kit at its top level"


def test_one_child_environment_and_one_process_group_stop(monkeypatch):
    """runtime.child_env puts the checkout first on PYTHONPATH once; stop_process_group ends a child's children too."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/elsewhere", str(runtime.ROOT)]))
    env = runtime.child_env(EXTRA="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(runtime.ROOT), "/elsewhere"] and env["EXTRA"] == "1"
    code = "import subprocess, sys, time; print(subprocess.Popen(['sleep', '60']).pid, flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    with proc.stdout:
        grandchild = int(proc.stdout.readline())
    t0 = time.monotonic()
    runtime.stop_process_group(proc, grace_s=5)
    assert proc.poll() is not None and time.monotonic() - t0 < 5
    stat = Path(f"/proc/{grandchild}/stat")
    for _ in range(50):  # the orphaned grandchild is reaped by init shortly after it dies
        if not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the grandchild {grandchild} outlived its process group's stop")
    runtime.stop_process_group(proc)  # already gone: returns quietly


def test_steps_beyond_the_budget_are_skipped_and_said_so(tmp_path):
    out = tmp_path / "ev"
    steps = (fake("quick", "ok", weight=1), fake("too_big", "ok", weight=1, min_s=1000))
    status, _ = run_evidence(out, budget_s=30, steps=steps, log=lambda m: None)
    s = steps_by_name(manifest(out))
    assert status == 0  # skipping for want of time is recorded, not a failure
    assert s["too_big"]["status"] == "skipped" and "budget ran out" in s["too_big"]["why"]


def test_an_existing_folder_is_not_replaced_without_force(tmp_path):
    out = tmp_path / "ev"
    out.mkdir()
    with pytest.raises(FileExistsError):
        run_evidence(out, budget_s=10, steps=(fake("a", "ok"),), log=lambda m: None)
    status, _ = run_evidence(out, budget_s=30, steps=(fake("a", "ok"),), force=True, log=lambda m: None)
    assert status == 0 and (out / "a.txt").exists()


def test_sigterm_stops_the_step_and_still_finishes_the_folder(tmp_path):
    out = tmp_path / "ev"
    code = ("import sys; from fastpath_lib.bench.evidence import Step, run_evidence\n"
            "steps = (Step('stuck', 't', 1, 'tests.bench.evidence_fakes:hang'), Step('never', 't', 1, "
            "'tests.bench.evidence_fakes:ok'))\n"
            f"sys.exit(run_evidence({str(out)!r}, budget_s=300, steps=steps)[0])")
    with subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          stderr=subprocess.PIPE, text=True) as proc:
        staging = None
        for _ in range(300):
            found = [p for p in tmp_path.iterdir() if p.name.startswith(".ev.partial-")]
            if found and (found[0] / "before_hang.txt").exists():
                staging = found[0]
                break
            time.sleep(0.1)
        assert staging is not None, "the simulated step never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
    s = steps_by_name(manifest(out))
    assert s["stuck"]["status"] == "failed" and "interrupted" in s["stuck"]["why"]
    assert s["never"]["status"] == "skipped" and "interrupted" in s["never"]["why"]
    assert no_staging_left(tmp_path)


def test_dry_run_prints_the_plan_and_checks_imports(capsys):
    from fastpath_lib.bench.preflight import PREFLIGHT_S

    assert evidence.dry_run(420, collect=False) == 0
    text = capsys.readouterr().out
    plan = evidence.plan(420 - PREFLIGHT_S)
    width = max(len(s.name) for s, _ in plan)  # the names are padded to the longest one
    for s, b in plan:
        assert f"{s.name:<{width}} {s.min_s:3.0f} s {s.est_s:5.0f} s {b:4.0f} s" in text, s.name
        assert f"cost: {s.basis}" in text
    assert "the plan fits and everything the steps need imports" in text and "left out by default: sanitizer" in text
    assert evidence.dry_run(300, collect=False) == 1  # the minimums do not fit
    assert "PROBLEM: the plan does not fit its budget" in capsys.readouterr().out
    broken = (Step("x", "needs a missing module", 1, "tests.bench.evidence_fakes:ok", needs=("no_such_module_xyz",)),)
    assert evidence.dry_run(420, broken, collect=False) == 1
    assert "cannot import no_such_module_xyz" in capsys.readouterr().out


def test_dry_run_on_the_bare_package_set(tmp_path):
    """The dry run's plan and import check with only the GPU machine's packages importable. Its test collection there
    is what ``test_pytest_config.test_gpu_marker_runs_on_the_bare_package_set`` runs (``pytest -m gpu tests``
    imports every test file, the core step's included), so it is not repeated here."""
    script = tmp_path / "dry_run.py"
    script.write_text("from fastpath_lib.bench import evidence\n"
                      "raise SystemExit(evidence.dry_run(480, collect=False))\n")
    res = subprocess.run([sys.executable, "tools/bare_packages.py", str(script)], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "everything the steps need imports" in res.stdout and "PROBLEM" not in res.stdout, res.stdout[-3000:]


def test_dry_run_collects_with_the_test_steps_own_commands(tmp_path):
    """The gpu step collects all of ``tests/`` (``-m gpu tests``): a test file that does not import anywhere there
    fails the dry run's collection, while the core files alone would still collect."""
    tests = tmp_path / "tests"
    (tests / "rmsnorm").mkdir(parents=True)
    (tests / "rmsnorm" / "test_predicate.py").write_text("import pytest\n\n@pytest.mark.gpu\ndef test_a():\n"
                                                         "    pass\n\ndef test_b():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: x\n    slow: x\n    browser: x\n")
    # (a clean collection is test_dry_run_command_on_the_bare_package_set's, on the kit's own tests)
    (tests / "test_other.py").write_text("import no_such_module_xyz\n")
    ok, line = evidence_steps.collect_tests(root=tmp_path)
    assert not ok and line.startswith("gpu_tests: exit 2") and "core_tests: 1 tests" in line, line


@pytest.mark.skipif(runtime.cuda_available(), reason="checks the machine without CUDA")
def test_without_cuda_it_exits_nonzero_naming_cuda_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "ev"
    assert main(["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: the evidence preflight refused") and "cuda: no CUDA device" in err
    assert list(tmp_path.iterdir()) == []
    # and as the command a GPU operator would type, from a plain checkout
    res = subprocess.run([sys.executable, "-m", "fastpath_lib", "evidence", "--out", str(out)], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "CUDA" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_real_steps_run_in_the_same_machinery(tmp_path):
    """The host and PR-note steps run here for real (host time is a CPU measurement); the rest need CUDA."""
    import pandas as pd

    from fastpath_lib.bench import vllmhost

    out = tmp_path / "ev"
    steps = tuple(s for s in STEPS if s.name in ("host", "pr_note"))
    status, _ = run_evidence(out, budget_s=300, steps=steps, log=lambda m: None)
    s = steps_by_name(manifest(out))
    assert status == 0, s
    assert s["host"]["status"] == "ran" and "results.csv" in s["host"]["outputs"]
    fused = "ops/fused_add_rms_norm/results.csv"
    assert fused in s["host"]["outputs"]  # one step for every op, each op's rows in its own table
    for table, first, op in (("results.csv", "host_decode_m1_fp16", "rms_norm"),
                             (fused, "host_decode_m1_4096_bf16", "fused_add_rms_norm")):
        ids = set(pd.read_csv(out / table).case_id)
        # vLLM's rows (run or skipped), timed for every op in one child: each op's table holds its own IR op's
        theirs = vllmhost.case_ids(vllmhost.vllm_ops()[op])
        assert first in ids and {i for i in ids if i.startswith("vllm_")} == theirs, (table, ids)
    note = (out / "pr_note.md").read_text()
    assert "Host cost of the dispatch" in note and "host_decode_m1_fp16" in note
    assert "not recorded in this run" in note  # no compiled facts in this run, and the note says so


def test_sanitizer_step_records_absence_refusal_errors_and_success(tmp_path, monkeypatch):
    ctx = evidence_steps.StepContext(out=tmp_path, budget_s=60, started=time.monotonic())
    monkeypatch.setattr(evidence_steps, "find_sanitizer", lambda: None)
    res = evidence_steps.sanitizer(ctx)
    assert res["status"] == "skipped" and "not found" in res["why"]

    def tool(body):
        path = tmp_path / "fake-sanitizer"
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        monkeypatch.setattr(evidence_steps, "find_sanitizer", lambda: str(path))
        return evidence_steps.sanitizer(ctx)

    res = tool("echo 'compute-sanitizer: this device is not supported'; exit 1\n")
    assert res["status"] == "skipped" and "refused" in res["why"] and "not supported" in res["why"]
    res = tool("echo '48 boundary points launched (of 48)'; echo '========= ERROR SUMMARY: 2 errors'; exit 99\n")
    assert res["status"] == "failed" and "2 errors" in res["why"]
    res = tool("echo '48 boundary points launched (of 48)'; echo '========= ERROR SUMMARY: 0 errors'; exit 0\n")
    assert res["status"] == "ran" and res["details"]["errors"] == 0
    assert (tmp_path / "sanitizer" / "memcheck.txt").read_text().startswith("48 boundary points")
    res = tool("echo '0 boundary points launched (of 48)'; echo '========= ERROR SUMMARY: 0 errors'; exit 0\n")
    assert res["status"] == "failed" and "no boundary point" in res["why"]
    res = tool("echo '========= ERROR SUMMARY: 0 errors'; exit 1\n")
    assert res["status"] == "failed" and "differ from the reference" in res["why"]


def test_test_steps_stop_between_tests_at_their_budget_and_keep_the_junit(tmp_path):
    """The core step's own command on a checkout whose core tests take 0.25 s each, 200 of them: the soft deadline
    (the step's deadline less 15 s, 10 s in here) stops pytest between tests, the JUnit XML is written, and the step
    is "partial" with what it collected and what it ran."""
    root, out = tmp_path / "checkout", tmp_path / "out"
    (root / "tests" / "rmsnorm").mkdir(parents=True)
    out.mkdir()
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: x\n    slow: x\n    browser: x\n")
    (root / "tests" / "rmsnorm" / "test_predicate.py").write_text(
        "import time\nimport pytest\n\n@pytest.mark.parametrize('i', range(200))\ndef test_slow(i):\n"
        "    time.sleep(0.25)\n")
    ctx = evidence_steps.StepContext(out=out, budget_s=28, started=time.monotonic(), root=root)
    res = evidence_steps.core_tests(ctx)
    assert res["status"] == "partial", res  # stopped early: not "ran"
    assert "stopped at the time budget" in res["why"]
    counts = res["details"]
    assert counts["tests"] >= 1 and counts["failures"] == counts["errors"] == 0
    assert counts["collected"] == 200 > counts["run"] == counts["tests"]
    assert f"of {counts['collected']} collected" in res["why"]
    assert (out / "tests" / "core.xml").exists() and (out / "tests" / "core.txt").exists()


def test_the_matrix_writes_what_it_has_as_it_goes(tmp_path, monkeypatch):
    """environment.json first, results.csv after every case, and cases past the deadline recorded as not run: a cut
    in the middle of the evidence run's matrix step keeps both (the step's process is killed at its budget)."""
    from fastpath_lib.bench import harness, opbench
    from fastpath_lib.bench.matrix import load_cases

    cases = load_cases()
    seen = []

    def fake_measure(spec, case, providers, *, gpu, **kw):
        seen.append((case.id, tuple(providers)))
        assert (tmp_path / "environment.json").exists()
        if len(seen) > 1:  # the previous case is on disk before the next one starts
            assert seen[-2][0] in (tmp_path / "results.csv").read_text()
        if len(seen) == 2:
            time.sleep(0.3)  # the deadline passes during the second case
        return [dict(row, status="ok", median_us=1.0, q20_us=1.0, q80_us=1.0)
                for row in opbench.not_run(spec, case, providers, quick=False, gpu=gpu)]

    monkeypatch.setattr(harness, "time_case", fake_measure)
    df = harness.run_matrix(cases, folder=tmp_path, deadline=time.monotonic() + 0.2, analyses=False,
                            copy=(1.0, "simulated"), progress=False)
    assert [c for c, _ in seen] == [cases[0].id, cases[1].id]
    env = json.loads((tmp_path / "environment.json").read_text())
    assert env["declared_cases"] == [c.id for c in cases]
    not_run = df[df.status == "not run"]
    assert set(not_run.case_id) == {c.id for c in cases[2:]} | {c.id for c in cases[:2]}  # compile pass too
    assert (not_run[not_run.case_id == cases[0].id].provider == "compiled").all()
    from fastpath_lib.bench.analysis import coverage_line

    line = coverage_line(df, env)
    assert line.startswith(f"2 of {len(cases)} predeclared cases run (not run: {cases[2].id}, ")
    ok = df[df.status == "ok"]
    assert set(ok.case_id) == {cases[0].id, cases[1].id}


def test_each_job_is_one_step_for_every_op():
    """One step per job, one function per job: the matrix is a step per op (the same function, reading ``ctx.op``);
    every other job's step serves every op in one process (each process start costs a torch import and CUDA's)."""
    from fastpath_lib.bench import evidence_steps
    from fastpath_lib.bench.evidence import STEPS

    by_name = {s.name: s for s in STEPS}
    assert by_name["fused_add_rms_norm_matrix"].target == by_name["matrix"].target
    assert (by_name["fused_add_rms_norm_matrix"].ops, by_name["matrix"].ops) == (("fused_add_rms_norm",),
                                                                                  ("rms_norm",))
    for job in ("sweep", "replay", "compile_cost", "compiled", "compiled_baselines"):
        assert by_name[job].ops == ("rms_norm", "fused_add_rms_norm"), job
        assert f"fused_add_rms_norm_{job}" not in by_name
    twins = [n for n in evidence_steps.__all__ if n.startswith("op_") and n != "op_host"]
    assert not twins, twins


def test_a_step_of_several_ops_runs_each_reports_the_worst_and_keeps_going(tmp_path):
    ctx = evidence_steps.StepContext(out=tmp_path, budget_s=60, started=time.monotonic(),
                                     op="rms_norm,fused_add_rms_norm")
    seen = []

    def part(spec, deadline):
        seen.append((spec.name, round(deadline - time.monotonic())))
        if spec.name == "rms_norm":
            raise RuntimeError("simulated")
        return {"status": "partial", "why": "half", "details": {"collected": 2, "run": 1}}

    res = evidence_steps._each_op(ctx, part)
    assert [n for n, _ in seen] == ["rms_norm", "fused_add_rms_norm"]
    assert seen[0][1] == pytest.approx(ctx.left() / 2, abs=2)  # an equal share of what is left, each
    assert res["status"] == "failed" and "simulated" in res["why"] and "half" in res["why"]
    assert res["details"]["fused_add_rms_norm"] == {"collected": 2, "run": 1}


def test_rms_norm_matrix_step_runs_on_the_generic_runner_into_the_staging_folder(tmp_path, monkeypatch):
    """RMSNorm's matrix step is the same run_op as any op's: environment.json first, results.csv after every case
    (here one case, then the budget is spent), every case of cases.json declared, the files in the staging folder."""
    from fastpath_lib.bench import evidence_steps, opbench, timing
    from fastpath_lib.bench.matrix import load_cases
    from fastpath_lib.bench.results import load_results

    declared = [c.id for c in load_cases()]
    seen, copies = [], []

    def one_case(spec, case, providers, *, gpu, quick, **kw):
        assert (tmp_path / "environment.json").exists() and not (tmp_path / "ops").exists()
        seen.append(case.id)
        copies.append(kw.get("copy_gbps"))
        time.sleep(0.3)  # the budget runs out during the first case
        return [dict(r, status="ok", median_us=1.0, q20_us=1.0, q80_us=1.0)
                for r in opbench.not_run(spec, case, providers, quick=quick, gpu=gpu)]

    monkeypatch.setattr(opbench, "time_case", one_case)
    monkeypatch.setattr(timing, "copy_bandwidth", lambda device, *a, **k: (12.5, f"{device} copy (simulated)"))
    ctx = evidence_steps.StepContext(out=tmp_path, budget_s=3.2, started=time.monotonic())  # deadline in 0.2 s
    res = evidence_steps.matrix(ctx)
    df, env = load_results(tmp_path)
    # the copy step did not run: the matrix measured the ceiling itself and kept it for the next op
    assert json.loads((tmp_path / "copy_bandwidth.json").read_text())["gbps"] == 12.5
    assert env["harness"]["copy_gbps"] == 12.5 and copies == [12.5]
    assert seen == [declared[0]] and env["op"] == "rms_norm" and env["evidence_run"]
    assert env["declared_cases"] == declared and list(dict.fromkeys(df.case_id)) == declared
    assert set(df[df.case_id != declared[0]].status) == {"not run"} and f"1 of {len(declared)}" in res["why"]


# --- the rehearsal: the default plan, driven end to end on a simulated clock ----------------------------------------

def _rehearse(tmp_path, cost, budget_s=evidence.DEFAULT_BUDGET_S, preflight_s=None):
    from fastpath_lib.bench.preflight import PREFLIGHT_EST_S

    preflight_s = PREFLIGHT_EST_S if preflight_s is None else preflight_s
    from tests.bench.evidence_fakes import SimClock, simulated_runner

    clock = SimClock()
    clock.t += preflight_s  # main() runs the preflight first and gives the run what is left of the budget
    out = tmp_path / "ev"
    status, folder = run_evidence(out, budget_s=budget_s - preflight_s, steps=STEPS, log=lambda m: None,
                                  clock=clock, runner=simulated_runner(clock, cost))
    return status, folder, manifest(folder), clock.t - 1000.0


def test_rehearsal_every_step_of_the_default_plan_starts_fits_and_writes_what_it_promises(tmp_path):
    """Each step costs what the plan expects of it (``est_s``): every step starts with at least its minimum, ends
    within its budget, writes the files it promises, and the whole run, preflight included, ends within 420 s with the
    folder complete."""
    from tests.bench.evidence_fakes import promised_files

    status, folder, m, elapsed = _rehearse(tmp_path, lambda s: s.est_s)
    assert status == 0 and m["complete"] is True and m["missing"] == [] and not (folder / INCOMPLETE_MARKER).exists()
    assert elapsed <= evidence.DEFAULT_BUDGET_S
    for step, entry in zip(STEPS, m["steps"]):
        assert entry["status"] == "ran", entry
        assert entry["budget_s"] >= step.min_s and entry["seconds"] <= entry["budget_s"], entry
        for f in promised_files(step):
            assert (folder / f).is_file() and f in entry["outputs"], (step.name, f)


def test_rehearsal_when_every_step_takes_half_again_its_estimate(tmp_path):
    """A slower machine: every step takes 1.5x its estimate. The run still ends within its budget (cuts included),
    every step is recorded, none starts with less than its minimum, and the folder stays marked partial, naming what
    is missing; the files of the steps that ran are there."""
    from tests.bench.evidence_fakes import promised_files

    status, folder, m, elapsed = _rehearse(tmp_path, lambda s: 1.5 * s.est_s)
    assert elapsed <= evidence.DEFAULT_BUDGET_S + evidence._GRACE_S
    assert [e["name"] for e in m["steps"]] == [s.name for s in STEPS]
    not_ran = [e for e in m["steps"] if e["status"] != "ran"]
    assert not_ran and m["complete"] is False
    marker = (folder / INCOMPLETE_MARKER).read_text()
    for e in not_ran:
        assert e["name"] in marker and e.get("why")
    for step, e in zip(STEPS, m["steps"]):
        if e["status"] == "skipped":
            assert "budget ran out" in e["why"]
        else:
            assert e["budget_s"] >= step.min_s
        if e["status"] == "ran":
            assert all((folder / f).is_file() for f in promised_files(step))


# --- the preflight -------------------------------------------------------------------------------------------------

def _no_probe(timeout):
    raise AssertionError("the device checks ran without CUDA")


def _probe(**over):
    res = {"jit": {"ok": True, "detail": "one launch"}, "capture": {"ok": True, "detail": "replayed"},
           "memory": {"free_gib": 70.0, "total_gib": 79.6}, "device_name": "NVIDIA H100 80GB HBM3",
           "capability": "sm_90"}
    res.update(over)
    return lambda timeout: res


def _failed(checks):
    return {c["check"]: c["detail"] for c in checks if not c["ok"]}


def test_preflight_without_cuda_refuses_and_says_why(tmp_path):
    from fastpath_lib.bench.preflight import preflight, refusal, toolchain

    ok, checks = preflight(420, STEPS, cuda=False, probe=_no_probe, launcher=True,
                           tools=lambda: toolchain(which=lambda n: None, environ={}, include=str(tmp_path)))
    bad = _failed(checks)
    assert not ok and set(bad) == {"cuda", "toolchain"}, checks
    assert "no CUDA device" in bad["cuda"]
    assert "no C compiler" in bad["toolchain"] and f"no Python.h in {tmp_path}" in bad["toolchain"]
    text = refusal(checks)
    assert text.startswith("error: the evidence preflight refused") and "  cuda: no CUDA device" in text
    ok, checks = preflight(420, STEPS, cuda=True, interpreter=True, probe=_no_probe, launcher=False)
    assert not ok and "TRITON_INTERPRET" in _failed(checks)["cuda"]
    ok, checks = preflight(420, STEPS, cuda=False, interpreter=True, probe=_no_probe, launcher=False)
    assert "no CUDA device" in _failed(checks)["cuda"] and "TRITON_INTERPRET is set" in _failed(checks)["cuda"]


def test_preflight_runs_the_device_checks_and_refuses_each_failure():
    from fastpath_lib.bench.preflight import MIN_FREE_GIB, preflight

    run = dict(cuda=True, interpreter=False, launcher=False)
    ok, checks = preflight(420, STEPS, probe=_probe(), **run)
    assert ok and [c["check"] for c in checks] == ["cuda", "toolchain", "plan", "jit_launch", "graph_capture",
                                                   "memory", "device_name"], checks
    assert "NVIDIA H100 80GB HBM3 (sm_90)" in checks[-1]["detail"]
    for probe, failed in ((_probe(jit={"ok": False, "detail": "RuntimeError: Failed to find C compiler"}),
                           "jit_launch"),
                          (_probe(capture={"ok": False, "detail": "operation not permitted when stream is capturing"}),
                           "graph_capture"),
                          (_probe(memory={"free_gib": MIN_FREE_GIB - 1, "total_gib": 80.0}), "memory"),
                          (lambda t: {"error": f"the device checks did not finish within {t:.0f} s"}, "device")):
        ok, checks = preflight(420, STEPS, probe=probe, **run)
        assert not ok and list(_failed(checks)) == [failed], checks
    ok, checks = preflight(300, STEPS, probe=_probe(), **run)  # the plan's minimums do not fit
    assert not ok and list(_failed(checks)) == ["plan"] and "do NOT fit 300 s" in _failed(checks)["plan"]


def test_toolchain_is_found_the_way_triton_finds_it(tmp_path):
    import triton

    from fastpath_lib.bench.preflight import needs_c_launcher, toolchain

    (tmp_path / "Python.h").write_text("")
    assert toolchain(which=lambda n: None, environ={"CC": "/opt/cc"}, include=str(tmp_path))["ok"]
    assert toolchain(which=lambda n: f"/usr/bin/{n}" if n == "clang" else None, environ={},
                     include=str(tmp_path))["detail"].startswith("C compiler /usr/bin/clang")
    # Triton 3.6 builds its C launcher at first launch (the GPU machine's), 3.8 its driver.c utilities
    # (triton/backends/nvidia/driver.py: compile_module_from_file(src_path=...driver.c)): both need the toolchain
    assert triton.__version__ and needs_c_launcher() is True


def test_the_pr_note_says_a_test_suite_stopped_early_and_the_run_is_partial():
    import pandas as pd

    from fastpath_lib import opspec
    from fastpath_lib.bench import opbench
    from fastpath_lib.bench.report import pr_note

    spec = opspec.get("rms_norm")
    df = pd.DataFrame([dict(r, status="ok", median_us=1.0, q20_us=1.0, q80_us=1.0, route="triton")
                       for c in spec.matrix() for r in opbench.not_run(spec, c, opbench.providers_of(spec),
                                                                        quick=False, gpu=True)])
    env = {"gpu_measurement": True, "device_name": "NVIDIA H100 80GB HBM3", "compute_capability": "sm_90",
           "op": "rms_norm", "harness": {}}
    manifest = {"steps": [{"name": "core_tests", "status": "partial", "why": "stopped",
                           "details": {"collected": 285, "run": 40}},
                          {"name": "gpu_tests", "status": "ran"}]}
    note = pr_note(df=df, env=env, spec="rms_norm", manifest=manifest,
                   tests={"core": {"tests": 40, "failures": 0, "errors": 0, "skipped": 0},
                          "gpu": {"tests": 17, "failures": 0, "errors": 0, "skipped": 0}})
    core = next(ln for ln in note.splitlines() if ln.startswith("- core:"))
    assert "PARTIAL: stopped at the time budget after 40 of 285 collected tests" in core
    assert "PARTIAL" not in next(ln for ln in note.splitlines() if ln.startswith("- gpu:"))
    assert "PARTIAL: 1 step incomplete" in note and "`core_tests` stopped early (partial)" in note


def test_compiled_baselines_replace_the_matrix_rows_and_check_the_deadline_before_each_compile(tmp_path, monkeypatch):
    """The matrix leaves torch.compile's rows skipped (its own step times them); that step replaces each compiled case's
    row in place, and does not start a compile that the deadline leaves no room for."""
    import pandas as pd

    from fastpath_lib import opspec
    from fastpath_lib.bench import opbench, results

    spec = opspec.get("rms_norm")
    picked = opbench.pick_compiled_cases(spec)
    assert [c.pass_ for c in picked] == ["forward", "forward"] and picked[0].rows < picked[1].rows
    rows = [dict(r, status="skipped" if r["provider"] == "compiled" else "ok", note=opbench.COMPILED_STEP_NOTE)
            for c in spec.matrix() for r in opbench.not_run(spec, c, opbench.providers_of(spec), quick=False,
                                                            gpu=False)]
    results.write_table(tmp_path, pd.DataFrame(rows))
    calls = []

    def fake_time_case(spec, case, providers, **kw):
        calls.append(case.id)
        assert list(providers) == ["compiled"] and kw["check"] is False
        return [dict(r, status="ok", median_us=3.0, compile_s=12.0)
                for r in opbench.not_run(spec, case, providers, quick=False, gpu=False)]

    monkeypatch.setattr(opbench, "time_case", fake_time_case)
    res = opbench.time_compiled(spec, tmp_path, deadline=time.monotonic() + 1000, compile_s_estimate=1)
    assert res["timed"] == calls == [c.id for c in picked] and not res["not_started"]
    df = pd.read_csv(tmp_path / "results.csv")
    assert list(dict.fromkeys(df.case_id)) == [c.id for c in spec.matrix()]  # the order is kept
    compiled = df[df.provider == "compiled"].set_index("case_id")
    assert (compiled.loc[[c.id for c in picked], "status"] == "ok").all() and len(df) == len(rows)
    assert (compiled.drop([c.id for c in picked]).status == "skipped").all()
    calls.clear()
    res = opbench.time_compiled(spec, tmp_path, deadline=time.monotonic() + 30, compile_s_estimate=40)
    assert calls == [] and res["not_started"] == [c.id for c in picked]  # no room for one cold compile
