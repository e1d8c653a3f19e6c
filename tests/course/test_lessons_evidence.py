"""The evidence lessons 05-07 read: the newest recorded GPU run, a peer's published data, the weighted trace replay,
the ahead-of-time build cost and the boundary plot's labels.

Every GPU results folder here is SIMULATED (constructed in a temporary folder, nothing in it was measured): it proves
the lessons' code path works unchanged once a real ``results/<device>-<date>/`` folder lands.
"""

from __future__ import annotations

import json
import math
import os

import pandas as pd
import pytest
import torch

from fastpath_lib import bench
from fastpath_lib.bench import buildcost, peer, reading, results, trace
from fastpath_lib.bench.schema import CSV_COLUMNS, HOST_FAMILY, empty_row
from fastpath_lib.bench.timing import bytes_moved

DECLARED = [c.id for c in bench.load_cases()]


def _row(case_id, provider, median, *, route="triton", expected="win", rows=4096, cols=4096, family="prefill",
         gpu=True, declared=None, fastest=None):
    return empty_row(case_id=case_id, family=family, provider=provider, rows=rows, cols=cols, dtype="bfloat16",
                     layout="contiguous", pad=0, offset=0, declared_shape=declared or f"{rows}x{cols}",
                     expected=expected, rationale="simulated", route=route, status="ok", median_us=median,
                     min_us=fastest,
                     q20_us=median * 0.98, q80_us=median * 1.02, gpu_measurement=gpu, samples_us=f"[{median}]",
                     bytes_moved=bytes_moved(rows, cols, torch.bfloat16, "forward"), launches_per_call=1.0,
                     **{"pass": "forward"})


def _folder(root, name, *, gpu=True, timestamp="2026-12-01T00:00:00+00:00", synthetic=False, incomplete=False,
            device="Simulated H200"):
    """A results folder: two matrix cases (a win and a fallback) and one host-overhead case."""
    d = root / name
    d.mkdir(parents=True)
    rows = [_row("prefill_4096x4096_fp16", "baseline", 20.0, gpu=gpu),
            _row("prefill_4096x4096_fp16", "dispatched", 10.0, gpu=gpu),
            _row("decode_m1_fp16", "baseline", 5.0, route="fallback", expected="fallback", rows=1, gpu=gpu),
            _row("decode_m1_fp16", "dispatched", 5.0, route="fallback", expected="fallback", rows=1, gpu=gpu),
            _row("host_decode_m1_fp16", "baseline", 4.5, route="fallback", expected="fallback", rows=1,
                 family=HOST_FAMILY, gpu=gpu, fastest=4.0),
            _row("host_decode_m1_fp16", "dispatched", 5.5, route="fallback", expected="fallback", rows=1,
                 family=HOST_FAMILY, gpu=gpu, fastest=4.2)]  # the table compares the fastest blocks
    results.write_table(d, pd.DataFrame(rows, columns=CSV_COLUMNS))
    env = {"gpu_measurement": gpu, "synthetic": synthetic, "device_name": device if gpu else None,
           "compute_capability": "sm_90" if gpu else None, "timestamp": timestamp, "git_commit": "0123456789abcdef",
           "interpreter": not gpu, "declared_cases": DECLARED, "harness": {"timer": "simulated"}}
    (d / "environment.json").write_text(json.dumps(env))
    if incomplete:
        (d / results.INCOMPLETE_MARKER).write_text("simulated interrupted run\n")
    return d


# --- the newest recorded GPU run ------------------------------------------------------------------------------------

def test_no_results_folder_says_so_plainly(tmp_path):
    rec = reading.recorded_gpu_run(tmp_path / "results")
    assert not rec.found and rec.df is None
    assert rec.line().startswith("no GPU run is recorded under results/")
    assert "python -m fastpath_lib evidence" in rec.line()


def test_cpu_synthetic_and_unfinished_folders_are_never_read_as_gpu_evidence(tmp_path):
    _folder(tmp_path, "cpu-2026-12-05", gpu=False, timestamp="2026-12-05T00:00:00+00:00")
    _folder(tmp_path, "syn-2026-12-06", synthetic=True, timestamp="2026-12-06T00:00:00+00:00")
    _folder(tmp_path, "h200-2026-12-07", incomplete=True, timestamp="2026-12-07T00:00:00+00:00")
    rec = reading.recorded_gpu_run(tmp_path)
    assert not rec.found
    assert "3 other folder(s) there are not finished GPU measurements" in rec.line()


def test_a_simulated_gpu_folder_runs_the_lessons_code_unchanged(tmp_path):
    old = _folder(tmp_path, "h200-2026-11-30", timestamp="2026-11-30T00:00:00+00:00", device="Older GPU")
    new = _folder(tmp_path, "h200-2026-12-01")
    _folder(tmp_path, "cpu-2026-12-09", gpu=False, timestamp="2026-12-09T00:00:00+00:00")  # newer, but not a GPU
    rec = reading.recorded_gpu_run(tmp_path)
    assert rec.found and rec.folder == new and rec.folder != old
    line = rec.line()
    assert line.startswith(f"newest GPU run: {tmp_path.name}/h200-2026-12-01 (Simulated H200, sm_90, 2026-12-01")
    assert "commit 0123456789ab" in line and f"2 of {len(DECLARED)} predeclared cases run" in line
    assert "1 other folder(s)" in line
    # lesson 05's cells on the recorded run
    summary = bench.summary_table(rec.df)
    assert summary.loc["prefill_4096x4096_fp16", "observed"] == "win"
    assert summary.loc["prefill_4096x4096_fp16", "speedup"] == pytest.approx(2.0)
    assert summary.loc["decode_m1_fp16", "observed"] == "fallback"
    fig = bench.boundary_plot(rec.df, env=rec.env)
    assert "GPU measurement" in fig.axes[0].get_title()
    host_t = bench.host_table(rec.df)
    assert host_t.loc["host_decode_m1_fp16", "ratio"] == pytest.approx(1.05)
    assert host_t.loc["host_decode_m1_fp16", "verdict"] == "within"
    # lesson 07's cell: the note drafted from the recorded folder
    note = bench.pr_note(rec.folder)
    assert "**GPU measurement**" in note and f"2 of {len(DECLARED)} predeclared cases run" in note


# --- the host plot and the boundary plot -------------------------------------------------------------------------

def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_host_plot_draws_each_fallback_pair_with_its_ratio():
    t = pd.DataFrame({"shape": ["1x4096", "8x256"], "dtype": ["float16"] * 2, "layout": ["contiguous"] * 2,
                      "route": ["fallback", "triton"], "baseline_us": [10.0, 10.0], "dispatched_us": [12.5, 30.0],
                      "launcher_us": [math.nan, 25.0], "ratio": [1.25, 1.2], "ratio_to": ["F.rms_norm", "launcher"],
                      "target": [1.15, math.nan], "verdict": ["OVER", "x"]}, index=["host_m1", "host_eligible"])
    fig = reading.host_plot(t, machine="test CPU")
    ax = fig.axes[0]
    assert [p.get_width() for p in ax.patches] == [10.0, 12.5]  # the eligible row (vs the launcher) is left out
    assert [s.strip() for s in _texts(ax)] == ["1.25x"]
    assert "CPU host time, test CPU" in ax.get_title() and "1.15x" in ax.get_title()
    assert "us" in ax.get_xlabel()


def test_boundary_plot_labels_the_shape_run_and_draws_the_threshold():
    rows = [_row("quick_case", p, 1.0, rows=16, cols=256, declared="4096x4096", gpu=False)
            for p in ("baseline", "dispatched")]
    rows += [_row("full_case", p, 1.0, rows=1, cols=4096, route="fallback", gpu=False)
             for p in ("baseline", "dispatched")]
    df = pd.DataFrame(rows, columns=CSV_COLUMNS)
    env = {"gpu_measurement": False, "interpreter": True, "declared_cases": ["full_case", "quick_case"]}
    ax = bench.boundary_plot(df, env=env).axes[0]
    texts = _texts(ax)
    key = next(t for t in texts if "\n" in t).splitlines()  # numbered in the declared order
    assert [k.split() for k in key] == [["1", "full_case"], ["2", "quick_case", "(ran", "16x256)"]]
    assert sorted(t for t in texts if "\n" not in t) == ["1", "2"]  # the numbers at the points
    lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("row threshold")]
    assert len(lines) == 1 and list(lines[0].get_xdata()) == [8, 8]
    # a recorded region wins over the rule for RMSNorm's older folders
    ax = bench.boundary_plot(df, env=dict(env, region={"min_rows": 4, "max_cols": 512, "source": "x"})).axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("row threshold")]
    assert list(lines[0].get_xdata()) == [4, 4] and ax.patches[0].get_height() == 511
    assert "rows" in ax.get_xlabel() and "columns" in ax.get_ylabel()


# --- the peer's published data ---------------------------------------------------------------------------------------

def test_peer_file_travels_with_its_licence_notice():
    notice = peer.PEER_NOTICE.read_text()
    assert peer.PEER_FILE.is_file() and "BSD 2-CLAUSE" in notice and "LinkedIn" in notice
    assert "2120862ba532c9449e72d603ba6324310ae756e7" in notice


def test_peer_data_in_the_kits_units():
    raw = pd.read_csv(peer.PEER_FILE)
    df = peer.load_peer()
    assert len(df) == len(raw) == 48
    first = raw.iloc[0]
    row = df[(df.provider == first.kernel_provider) & (df["mode"] == first.kernel_operation_mode)
             & (df.metric == first.metric_name) & (df.cols == first.x_value)].iloc[0]
    assert first.metric_unit == "ms" and row.unit == "us" and row["median"] == pytest.approx(first.y_value_50 * 1e3)
    mem = df[df.metric == "memory"]
    assert set(mem.unit) == {"MB"} and mem["median"].max() == pytest.approx(raw[raw.metric_name == "memory"]
                                                                              .y_value_50.max())


def test_peer_speedups_bandwidth_and_coverage():
    df = peer.load_peer()
    sp = peer.peer_speedups(df).set_index(["mode", "cols"])
    fwd = df[(df.metric == "speed") & (df["mode"] == "forward") & (df.cols == 1024)].set_index("provider")["median"]
    assert sp.loc[("forward", 1024), "speedup"] == pytest.approx(fwd["huggingface"] / fwd["liger"])
    assert not sp["ranges_overlap"].any()
    bw = peer.peer_bandwidth(df).set_index(["provider", "mode", "cols"])
    nbytes = bytes_moved(2048, 32768, torch.bfloat16, "forward")
    assert bw.loc[("liger", "forward", 32768), "bytes_moved"] == nbytes
    assert bw.loc[("liger", "forward", 32768), "gbps"] == pytest.approx(
        nbytes / (bw.loc[("liger", "forward", 32768), "median_us"] * 1e-6) / 1e9)
    both = bytes_moved(2048, 4096, torch.bfloat16, "backward")
    assert bw.loc[("liger", "full", 4096), "bytes_moved"] == both
    assert bw.loc[("liger", "backward", 4096), "bytes_moved"] == both - bytes_moved(2048, 4096, torch.bfloat16,
                                                                                    "forward")
    cov = peer.peer_coverage(df)
    assert cov["row_counts"] == [2048] and cov["dtypes"] == ["bfloat16"] and len(cov["gpus"]) == 1
    assert {"driver_version", "cuda_version", "torch", "triton", "git_commit"} <= set(cov["missing_metadata"])
    assert "device_name" not in cov["missing_metadata"] and "gpu_measurement" not in cov["missing_metadata"]


def test_peer_plot_has_readable_labelled_panels():
    fig = peer.peer_plot(peer.load_peer())
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.xaxis.label.get_fontsize() >= 10
    assert "us" in fig.axes[0].get_ylabel() and "GB/s" in fig.axes[2].get_ylabel()


def test_bad_peer_files_get_one_line(tmp_path):
    with pytest.raises(FileNotFoundError):
        peer.load_peer(tmp_path / "missing.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a Liger-Kernel benchmark CSV"):
        peer.load_peer(tmp_path / "other.csv")
    raw = pd.read_csv(peer.PEER_FILE)
    raw.loc[0, "kernel_name"] = "layer_norm"
    raw.to_csv(tmp_path / "mixed.csv", index=False)
    with pytest.raises(ValueError, match="only rms_norm rows"):
        peer.load_peer(tmp_path / "mixed.csv")


# --- the workload trace replay ---------------------------------------------------------------------------------------

def test_serving_trace_counts_prefill_and_decode_calls():
    calls = trace.serving_trace(hidden=256, layers=3, batch=2, prompt_tokens=10, decode_steps=7)
    assert [(c.phase, c.rows, c.cols, c.count) for c in calls] == [("prefill", 20, 256, 7), ("decode", 2, 256, 49)]


def test_replay_trace_weights_by_count_and_its_totals_add_up():
    calls = [trace.TraceCall("decode", 1, 64, torch.float32, 40), trace.TraceCall("prefill", 16, 64, torch.float32, 3),
             trace.TraceCall("decode", 2, 64, torch.float32, 10)]
    df = trace.replay_trace(calls, quick=True, rounds=1)
    tot = df.attrs["totals"]
    assert list(df.columns) == trace.TRACE_COLUMNS and list(df.calls) == [40, 3, 10]
    assert df.call_share.sum() == pytest.approx(1.0) and df.call_share[0] == pytest.approx(40 / 53)
    assert tot["calls"] == 53 and not tot["gpu_measurement"] and "not a GPU measurement" in tot["label"]
    assert list(df.route) == ["fallback", "triton", "fallback"]  # 16 rows >= the interpreter's threshold
    assert df.status[1].startswith("not measured") and math.isnan(df.baseline_us[1]) and not tot["complete"]
    ok = df[df.status == "ok"]
    assert tot["measured_calls"] == 50 == ok.calls.sum()
    assert (ok.baseline_total_us == ok.baseline_us * ok.calls).all()
    assert list(ok.dispatch_extra_total_us) == pytest.approx(list((ok.dispatched_us - ok.baseline_us) * ok.calls))
    assert tot["baseline_total_us"] == pytest.approx(ok.baseline_total_us.sum())
    assert tot["dispatched_total_us"] == pytest.approx(ok.dispatched_total_us.sum())
    assert ok.baseline_time_share.sum() == pytest.approx(1.0)
    assert (ok.baseline_total_us <= tot["baseline_total_us"]).all()


# --- compile time and binary size --------------------------------------------------------------------------------

def test_region_specializations_counts_the_launch_rule():
    from fastpath_lib.rmsnorm import compiled

    assert buildcost.region_specializations(archs=(90,)) == len(compiled.specializations(archs=(90,)))
    assert buildcost.region_specializations() == 2 * buildcost.region_specializations(archs=(90,))


def test_aot_build_cost_compiles_cold_and_restores_the_cache_setting(monkeypatch, tmp_path):
    from fastpath_lib.rmsnorm import compiled

    if compiled.missing_tools():
        pytest.skip(compiled.missing_tools())
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "mine"))
    spec = compiled.Specialization("forward", "float16", "float16", 64, 4, 1, True, 80)
    monkeypatch.setattr(compiled, "_cache", {}, raising=False)
    cost = buildcost.aot_build_cost([spec])
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "mine")
    assert not (tmp_path / "mine").exists()  # the compile went to its own temporary cache
    assert cost["files"] > 0 and cost["cubin_bytes"] > 0 and cost["cache_bytes"] >= cost["cubin_bytes"]
    assert [p["label"] for p in cost["per_specialization"]] == [spec.label()]
    assert cost["total_compile_s"] > 0 and "not a GPU measurement" in cost["note"]
    again = buildcost.aot_build_cost([spec])  # kept in the process: nothing compiled, nothing claimed
    assert again["files"] == 0 and again["total_compile_s"] is None


def test_a_partial_evidence_run_is_read_and_says_what_it_lacks(tmp_path):
    """A finished evidence run with a step partial, skipped or failed keeps its INCOMPLETE marker and a manifest: the
    lessons read it as the newest GPU run and say it is partial and what is missing; an interrupted run (a marker and
    no finished manifest) is still not read."""
    partial = _folder(tmp_path / "results", "h200-partial", incomplete=True, timestamp="2026-12-02T00:00:00+00:00")
    steps = [{"name": "matrix", "status": "ran"},
             {"name": "core_tests", "status": "partial", "why": "stopped", "details": {"collected": 285, "run": 40}},
             {"name": "capture", "status": "skipped", "why": "the run's budget ran out"}]
    (partial / "manifest.json").write_text(json.dumps({"finished": "2026-12-02T00:07:00", "steps": steps}))
    _folder(tmp_path / "results", "h200-interrupted", incomplete=True, timestamp="2026-12-03T00:00:00+00:00")
    rec = results.recorded_gpu_run(tmp_path / "results")
    assert rec.found and rec.folder == partial
    assert rec.missing == ["core_tests: partial, ran 40 of 285 (stopped)",
                           "capture: skipped (the run's budget ran out)"]
    assert "a PARTIAL run, missing: core_tests: partial, ran 40 of 285" in rec.line()
    assert "1 other folder(s)" in rec.line()  # the interrupted one, not read
