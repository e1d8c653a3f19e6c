"""The threshold tool (issue 9 item 3): a recorded sweep becomes the per-architecture row threshold, written with the
results folder it came from. The sweep folders here are SIMULATED (constructed in the test, never measured)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fastpath_lib.bench import cli
from fastpath_lib.bench.results import INCOMPLETE_MARKER
from fastpath_lib.bench.sweep import SWEEP_COLUMNS, propose, record_threshold, threshold_from_results
from fastpath_lib.rmsnorm import predicate, thresholds


def simulated_sweep(folder: Path, crossover: dict[int, int | None], *, gpu=True, cap="sm_90", proposal=None) -> Path:
    """A results folder with a threshold sweep in which Triton loses below ``crossover[width]`` rows and wins from
    there on (never, for ``None``)."""
    folder.mkdir(parents=True)
    rows = []
    for cols, cross in crossover.items():
        for r in (1, 4, 16, 64, 256, 1024, 4096):
            t = 5.0 if cross is not None and r >= cross else 20.0
            for p, med in (("baseline", 10.0), ("triton", t)):
                rows.append({"cols": cols, "rows": r, "dtype": "float16", "provider": p, "case_id": f"sweep_{r}x{cols}",
                             "status": "ok", "route": "n/a", "expected": "n/a", "q20_us": med * 0.98,
                             "median_us": med, "q80_us": med * 1.02, "samples_us": "[]", "timer": "simulated",
                             "gpu_measurement": gpu})
    pd.DataFrame(rows, columns=SWEEP_COLUMNS).to_csv(folder / "threshold.csv", index=False)
    (folder / "environment.json").write_text(json.dumps({
        "gpu_measurement": gpu, "compute_capability": cap if gpu else None, "device_name": "simulated GPU",
        "git_commit": "0" * 40, "timestamp": "2026-12-02T00:00:00+00:00"}))
    if proposal is not None:
        (folder / "threshold_proposal.json").write_text(json.dumps(proposal))
    return folder


def test_the_threshold_is_the_largest_per_width_crossover(tmp_path):
    run = simulated_sweep(tmp_path / "results" / "sim-sm90", {2048: 64, 4096: 256})
    info = threshold_from_results(run)
    assert info["per_width_crossover_rows"] == {2048: 64, 4096: 256}
    assert info["proposed_min_rows"] == 256 and info["capability"] == "sm_90"
    assert info["line"] == "CUDA_MIN_ROWS[(9, 0)] = 256"


def test_recording_writes_the_value_and_its_source(tmp_path):
    run = simulated_sweep(tmp_path / "results" / "sim-sm90", {2048: 64, 4096: 256})
    target = tmp_path / "thresholds.json"
    info = record_threshold(run, path=target, root=tmp_path)
    assert info["written"] == str(target)
    entry = thresholds.entries(target)["sm_90"]
    assert entry["min_rows"] == 256 and entry["source"] == "results/sim-sm90"
    assert entry["device_name"] == "simulated GPU" and entry["swept_widths"] == [2048, 4096]
    assert thresholds.load(target) == {(9, 0): 256}
    # a second architecture is added beside the first, not over it
    other = simulated_sweep(tmp_path / "results" / "sim-sm80", {4096: 1024}, cap="sm_80")
    record_threshold(other, path=target, root=tmp_path)
    assert thresholds.load(target) == {(9, 0): 256, (8, 0): 1024}
    assert thresholds.entries(target)["sm_80"]["source"] == "results/sim-sm80"


def test_no_threshold_from_cpu_unfinished_synthetic_or_losing_sweeps(tmp_path):
    with pytest.raises(ValueError, match="not a GPU measurement"):
        threshold_from_results(simulated_sweep(tmp_path / "cpu", {256: 8}, gpu=False))
    unfinished = simulated_sweep(tmp_path / "unfinished", {2048: 64})
    (unfinished / INCOMPLETE_MARKER).write_text("")
    with pytest.raises(ValueError, match="INCOMPLETE"):
        threshold_from_results(unfinished)
    synthetic = simulated_sweep(tmp_path / "synthetic", {2048: 64})
    env = json.loads((synthetic / "environment.json").read_text())
    (synthetic / "environment.json").write_text(json.dumps(dict(env, synthetic=True)))
    with pytest.raises(ValueError, match="synthetic"):
        threshold_from_results(synthetic)
    losing = simulated_sweep(tmp_path / "losing", {2048: 64, 8192: None})
    assert threshold_from_results(losing)["proposed_min_rows"] is None
    with pytest.raises(ValueError, match="no threshold supported: the fast route still loses"):
        record_threshold(losing, path=tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    cut = simulated_sweep(tmp_path / "cut", {2048: 64}, proposal={"complete": False, "proposed_min_rows": None})
    assert "did not finish every point" in threshold_from_results(cut)["reason"]
    with pytest.raises(FileNotFoundError):
        threshold_from_results(tmp_path / "missing")


def test_a_stored_proposal_that_disagrees_with_the_raw_sweep_is_refused(tmp_path):
    run = simulated_sweep(tmp_path / "run", {2048: 64}, proposal={"complete": True, "proposed_min_rows": 4})
    with pytest.raises(ValueError, match="says 4 but threshold.csv supports 64"):
        threshold_from_results(run)


def test_propose_matches_the_rule_on_the_sweep_table():
    table = pd.read_csv(simulated_sweep(Path(__import__("tempfile").mkdtemp()) / "r", {1024: 16}) / "threshold.csv")
    assert propose(table, capability=(9, 0))["proposed_min_rows"] == 16
    assert propose(table, capability=None)["proposed_min_rows"] is None
    # a width where the kernel wins, then loses again, then wins: the crossover is after the last loss
    flip = table.copy()
    flip.loc[(flip.provider == "triton") & (flip.rows == 64), "median_us"] = 20.0
    assert propose(flip, capability=(9, 0))["proposed_min_rows"] == 256


def test_cli_prints_writes_and_fails_cleanly(tmp_path, capsys):
    run = simulated_sweep(tmp_path / "run", {2048: 64})
    target = tmp_path / "thresholds.json"
    assert cli.threshold_main([str(run), "--file", str(target), "--check"]) == 0
    assert "sm_90: min_rows 64" in capsys.readouterr().out and not target.exists()
    assert cli.threshold_main([str(run), "--file", str(target)]) == 0
    assert thresholds.load(target) == {(9, 0): 64}
    assert cli.threshold_main([str(tmp_path / "nope"), "--file", str(target)]) == 2
    assert cli.threshold_main([str(simulated_sweep(tmp_path / "cpu", {256: 8}, gpu=False)), "--file",
                               str(target)]) == 2
    assert cli.threshold_main([str(simulated_sweep(tmp_path / "lose", {256: None})), "--file", str(target)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 3


def test_thresholds_file_reader(tmp_path):
    assert thresholds.load(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text('{"sm_90": {"min_rows": 0, "source": "x"}}')
    with pytest.raises(ValueError, match="min_rows >= 1"):
        thresholds.load(bad)
    bad.write_text('{"sm_90": {"min_rows": 64}}')
    with pytest.raises(ValueError, match="source"):
        thresholds.load(bad)
    bad.write_text('{"hopper": {"min_rows": 64, "source": "x"}}')
    with pytest.raises(ValueError, match="sm_XY"):
        thresholds.load(bad)
    bad.write_text("[1")
    with pytest.raises(ValueError, match="not valid JSON"):
        thresholds.load(bad)


def test_the_committed_file_is_valid_and_is_what_the_predicate_uses():
    recorded = thresholds.load()
    for cap, rows in recorded.items():
        assert rows >= 1 and thresholds.entries()[thresholds.arch_name(cap)]["source"]
    assert predicate.CUDA_MIN_ROWS == recorded


def test_a_partial_evidence_folder_gives_its_threshold_only_from_a_finished_sweep(tmp_path, capsys):
    """A finished evidence run with some step incomplete keeps its INCOMPLETE marker and a manifest saying what is
    missing: the threshold is recorded when the sweep itself finished (and the command prints what the run lacks),
    refused when the sweep is what stopped early."""
    from fastpath_lib.bench.cli import threshold_main
    from fastpath_lib.bench.results import INCOMPLETE_MARKER as MARKER

    def partial(name, sweep_status):
        run = simulated_sweep(tmp_path / name, {2048: 64})
        steps = [{"name": "sweep", "status": sweep_status, "why": "stopped at its deadline",
                  "details": {"collected": 45, "run": 30}},
                 {"name": "capture", "status": "skipped", "why": "the run's budget ran out"}]
        (run / "manifest.json").write_text(json.dumps({"finished": "2026-12-06T00:00:00", "steps": steps}))
        (run / MARKER).write_text("partial\n")
        return run

    ok = partial("ok", "ran")
    info = threshold_from_results(ok)
    assert info["proposed_min_rows"] == 64 and info["missing"] == ["capture: skipped (the run's budget ran out)"]
    assert threshold_main([str(ok), "--check"]) == 0
    assert "partial evidence run (its sweep finished); missing: capture: skipped" in capsys.readouterr().out
    with pytest.raises(ValueError, match="its sweep did not finish .sweep: partial, ran 30 of 45"):
        threshold_from_results(partial("cut", "partial"))


def test_the_proposal_reads_the_dispatched_call_per_dtype_and_skips_fallback_points():
    rows = []
    for dtype, cross in (("float16", 64), ("bfloat16", 256)):
        for r in (1, 4, 16, 64, 256, 1024):
            route = "fallback" if r < 8 else "triton"
            t = 10.0 if route == "fallback" else (5.0 if r >= cross else 20.0)
            for p, med in (("baseline", 10.0), ("dispatched", t)):
                rows.append({"cols": 4096, "rows": r, "dtype": dtype, "provider": p, "case_id": f"s_{dtype}_{r}",
                             "status": "ok", "route": route if p == "dispatched" else "n/a", "expected": "n/a",
                             "q20_us": med * 0.98,
                             "median_us": med, "q80_us": med * 1.02, "gpu_measurement": True})
    prop = propose(pd.DataFrame(rows), capability=(9, 0))
    # the fallback points (rows 1 and 4, at the baseline's time) are no evidence for the fast route
    assert prop["per_dtype_width_crossover_rows"] == {"bfloat16/4096": 256, "float16/4096": 64}
    assert prop["proposed_min_rows"] == 256 and prop["per_width_crossover_rows"] == {4096: 256}
