"""Tests of the evidence toolkit (fastpath_lib.bench): matrix rules, classification, metadata, CSV, plot, PR note."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

import fastpath_lib  # noqa: F401  (sets TRITON_INTERPRET before the kernels are imported)
from fastpath_lib import bench
from fastpath_lib.bench import cli, results
from fastpath_lib.bench.harness import CSV_COLUMNS, bytes_moved
from fastpath_lib.bench.matrix import BenchCase
from fastpath_lib.bench.metadata import REQUIRED_KEYS


def _row(case_id, provider, median, spread=0.05, route="triton", expected="win", rows=4096, cols=4096, **kw):
    r = {c: None for c in CSV_COLUMNS}
    r.update(case_id=case_id, family="synthetic", provider=provider, rows=rows, cols=cols, dtype="float16",
             layout="contiguous", pad=0, offset=0, expected=expected, rationale="synthetic", route=route,
             status="ok", median_ms=median, q20_ms=median * (1 - spread), q80_ms=median * (1 + spread),
             bytes_moved=2 * rows * cols * 2, gbps=1.0, pct_copy_bw=1.0, launches_per_call=1.0, note="",
             samples_ms="[]", **{"pass": "forward"})
    r.update(kw)
    return r


def synthetic_results() -> pd.DataFrame:
    """A SYNTHETIC table (constructed here, never measured) with a win, a neutral, a loss and a fallback case."""
    rows = []
    for cid, t, route, exp, shape in (("syn_win", 0.5, "triton", "win", (4096, 4096)),
                                      ("syn_neutral", 1.01, "triton", "neutral", (1024, 4096)),
                                      ("syn_loss", 1.6, "triton", "loss", (65536, 128)),
                                      ("syn_fallback", 1.0, "fallback", "fallback", (1, 4096))):
        rows.append(_row(cid, "baseline", 1.0, route=route, expected=exp, rows=shape[0], cols=shape[1]))
        rows.append(_row(cid, "dispatched", t, route=route, expected=exp, rows=shape[0], cols=shape[1]))
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


SYNTHETIC_GPU_ENV = {"gpu_measurement": True, "synthetic": True, "device_name": "synthetic device",
                     "interpreter": False, "harness": {"timer": "synthetic"}}
SYNTHETIC_CPU_ENV = {"gpu_measurement": False, "synthetic": True, "interpreter": True, "cpu_model": "synthetic",
                     "harness": {"timer": "synthetic"}}


# --- the matrix ----------------------------------------------------------------------------------------------------

def test_default_matrix_meets_the_coverage_rules():
    cases = bench.load_cases()
    assert len(cases) >= 12
    assert bench.check_coverage(cases) == []
    assert sum(c.expected in ("neutral", "loss") for c in cases) >= 2
    assert sum(c.expected == "fallback" for c in cases) >= 2
    assert {"decode", "prefill", "layout", "alignment", "width"} <= {c.family for c in cases}
    assert all(c.rationale and c.quick_shape for c in cases)


def test_coverage_rules_catch_a_thin_matrix():
    thin = [c for c in bench.load_cases() if c.expected == "win"][:3]
    missing = bench.check_coverage(thin)
    assert any("need >= 12" in m for m in missing)
    assert any("fallback" in m for m in missing)


def test_expected_fallback_cases_do_fall_back_in_quick_shapes():
    """The quick variant keeps the property that sends a case to the fallback (odd width, offset, transposed...)."""
    from fastpath_lib.rmsnorm.predicate import DEFAULT_CUDA_MIN_ROWS

    checked = 0
    for c in bench.load_cases():
        # small decode batches fall back on CUDA because of the row threshold, which the interpreter sets to 8
        if c.expected == "fallback" and (c.shape[0] >= DEFAULT_CUDA_MIN_ROWS or c.dims(True)[0] < 8):
            checked += 1
            x, ns, w = c.spec(quick=True).build(seed=0, device="cpu").args()
            assert fastpath_lib.explain(x, ns, w).route == "fallback", c.id
    assert checked >= 4


def test_bad_case_entries_are_rejected(tmp_path):
    entry = bench.load_cases()[0].to_json()
    assert BenchCase.from_json(entry).id == entry["id"]
    f = tmp_path / "cases.json"
    f.write_text(json.dumps({"cases": [dict(entry, expected="faster")]}))
    with pytest.raises(ValueError, match="expected"):
        bench.load_cases(f)
    f.write_text(json.dumps({"cases": [entry, entry]}))
    with pytest.raises(ValueError, match="duplicate"):
        bench.load_cases(f)


# --- classification -------------------------------------------------------------------------------------------------

def test_classification_win_neutral_loss_fallback():
    df = bench.classify(synthetic_results())
    disp = df[df.provider == "dispatched"].set_index("case_id")
    assert disp.loc["syn_win", "observed"] == "win"
    assert disp.loc["syn_neutral", "observed"] == "neutral"
    assert disp.loc["syn_loss", "observed"] == "loss"
    assert disp.loc["syn_fallback", "observed"] == "fallback"
    assert disp.loc["syn_fallback", "fallback_at_baseline"]
    assert disp.loc["syn_win", "speedup"] == pytest.approx(2.0)
    assert (df[df.provider == "baseline"].observed == "reference").all()


def test_noise_band_comes_from_the_measured_spread():
    """The same 15 % faster median is a win with tight samples and neutral with noisy ones."""
    tight = bench.classify(pd.DataFrame([_row("c", "baseline", 1.0, spread=0.02),
                                         _row("c", "dispatched", 0.85, spread=0.02)], columns=CSV_COLUMNS))
    noisy = bench.classify(pd.DataFrame([_row("c", "baseline", 1.0, spread=0.02),
                                         _row("c", "dispatched", 0.85, spread=0.2)], columns=CSV_COLUMNS))
    assert tight.observed.iloc[1] == "win"
    assert noisy.observed.iloc[1] == "neutral"
    assert noisy.noise_band.iloc[1] == pytest.approx(0.4)
    assert tight.noise_band.iloc[1] == pytest.approx(0.04)


def test_a_slow_fallback_is_flagged():
    df = bench.classify(pd.DataFrame([_row("c", "baseline", 1.0), _row("c", "dispatched", 2.0, route="fallback")],
                                     columns=CSV_COLUMNS))
    assert df.observed.iloc[1] == "fallback"
    assert df.fallback_at_baseline.iloc[1] is False or df.fallback_at_baseline.iloc[1] == False  # noqa: E712


def test_bytes_moved_counts_each_tensor_once():
    assert bytes_moved(4, 8, fastpath_lib_dtype("float16"), "forward") == 2 * 4 * 8 * 2 + 8 * 2
    assert bytes_moved(4, 8, fastpath_lib_dtype("float32"), "backward") == (2 * 32 + 8) * 4 + (3 * 32 + 16) * 4


def fastpath_lib_dtype(name):
    import torch

    return getattr(torch, name)


# --- metadata, plot, note ------------------------------------------------------------------------------------------

def test_environment_metadata_is_complete():
    env = bench.environment({"timer": "x"})
    assert set(REQUIRED_KEYS) <= set(env)
    assert env["harness"] == {"timer": "x"}
    assert env["torch"] and env["python"] and env["timestamp"]
    if not fastpath_lib.runtime.cuda_available():
        assert env["gpu_measurement"] is False and env["measurement_label"] == "not a GPU measurement"
    json.dumps(env)


def test_boundary_plot_writes_a_png(tmp_path):
    df = synthetic_results()
    fig = bench.boundary_plot(df, env=SYNTHETIC_GPU_ENV)
    out = tmp_path / "b.png"
    fig.savefig(out)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert "SYNTHETIC" in fig.axes[0].get_title()
    table = bench.boundary_table(df)
    assert set(table.case_id) == {"syn_win", "syn_neutral", "syn_loss", "syn_fallback"}
    assert table.set_index("case_id").loc["syn_fallback", "in_region"] == False  # noqa: E712


def test_pr_note_lists_every_outcome_for_gpu_data():
    note = bench.pr_note(df=synthetic_results(), env=SYNTHETIC_GPU_ENV, tests={"tests": 10, "failures": 0})
    assert "SYNTHETIC" in note
    for kind in ("**win** (1): syn_win", "**neutral** (1): syn_neutral", "**loss** (1): syn_loss",
                 "**fallback** (1): syn_fallback"):
        assert kind in note
    for section in ("## Summary", "## Eligibility region", "## Semantic evidence", "## Mechanism",
                    "## Performance", "## Workload replay", "## Why not", "## Maintenance", "## Limitations"):
        assert section in note
    assert "| forced |" in note and "tests 10" in note


def test_pr_note_never_claims_speed_from_cpu_data():
    note = bench.pr_note(df=synthetic_results(), env=SYNTHETIC_CPU_ENV)
    assert "not a GPU measurement" in note
    assert "Performance claim: unmeasured" in note
    assert not re.search(r"x faster|Speed-ups over|\d\.\d+x", note)
    assert "Test results: not attached" in note


# --- folders -------------------------------------------------------------------------------------------------------

def test_results_folder_is_never_silently_overwritten(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    with pytest.raises(FileExistsError, match="--force"):
        results.begin(out)
    staging = results.begin(out, force=True)
    assert (staging / bench.INCOMPLETE_MARKER).exists() and out.exists()
    with pytest.raises(ValueError, match="INCOMPLETE"):
        bench.load_results(staging)


def test_latest_gpu_results_skips_cpu_and_incomplete_runs(tmp_path):
    def make(name, gpu, ts, incomplete=False):
        d = tmp_path / name
        d.mkdir()
        (d / "environment.json").write_text(json.dumps({"gpu_measurement": gpu, "timestamp": ts}))
        if incomplete:
            (d / bench.INCOMPLETE_MARKER).write_text("")
        return d

    assert bench.latest_gpu_results(tmp_path) is None
    make("cpu-new", False, "2026-12-03")
    older = make("gpu-old", True, "2026-11-01")
    make("gpu-newer-broken", True, "2026-11-20", incomplete=True)
    assert bench.latest_gpu_results(tmp_path) == older
    assert bench.latest_gpu_results(tmp_path / "missing") is None


def test_compile_cost_off_gpu_says_nothing_compiles():
    cc = bench.compile_cost(bench.load_cases(), quick=True)
    assert cc["specializations"] >= 1 and len(cc["list"]) == cc["specializations"]
    if not fastpath_lib.runtime.cuda_available():
        assert cc["compiles"] is False and "not compiled" in cc["note"]


# --- one tiny real run ---------------------------------------------------------------------------------------------

def test_tiny_end_to_end_bench_run(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--out", str(out), "--quick", "--only", "decode_m1_fp16,odd_4096x4095_fp16", "--no-analyses"]
    assert cli.bench_main(args) == 0
    for name in ("results.csv", "environment.json", "boundary.png", "pr_note.md"):
        assert (out / name).stat().st_size > 0, name
    raw = pd.read_csv(out / "results.csv")
    assert list(raw.columns[:len(CSV_COLUMNS)]) == CSV_COLUMNS
    assert set(raw.provider) == set(bench.PROVIDERS) and set(raw.case_id) == {"decode_m1_fp16", "odd_4096x4095_fp16"}
    ok = raw[raw.status == "ok"]
    assert {"baseline", "dispatched", "triton"} <= set(ok.provider)
    for r in ok.itertuples():
        samples = json.loads(r.samples_ms)
        assert len(samples) >= 5 and all(s > 0 for s in samples)
        assert r.q20_ms <= r.median_ms <= r.q80_ms and not math.isnan(r.gbps)
    df, env = bench.load_results(out)
    assert (df[df.provider == "dispatched"].observed == "fallback").all()
    assert set(REQUIRED_KEYS) <= set(env)
    note = (out / "pr_note.md").read_text()
    if not env["gpu_measurement"]:
        assert "not a GPU measurement" in note and not re.search(r"x faster|\d\.\d+x", note)
        assert "NOT A GPU MEASUREMENT" in capsys.readouterr().out
    assert cli.bench_main(args) == 2  # the folder exists: refused without --force
    assert cli.compare_main([str(out), str(out)]) == 0
