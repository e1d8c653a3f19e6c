"""The shared timing core of the bench (:mod:`fastpath_lib.bench.timing`): one place for the timing columns of a result
row, the compile-skip rule and its text, and the first call's time, used by every runner."""

from __future__ import annotations

import json
import time

import pytest

from fastpath_lib.bench import timing


def test_timed_fields_reads_the_samples_it_was_given(monkeypatch):
    samples = [5.0, 1.0, 4.0, 2.0, 3.0]
    monkeypatch.setattr(timing, "time_callable", lambda fn, settings: {
        "samples_us": samples, "timer": "t", "warmup": "w", "reps": 5, "number": 7})
    got = timing.timed_fields(lambda: None, {})
    assert (got["median_us"], got["min_us"], got["mean_us"]) == (3.0, 1.0, 3.0)
    assert got["q20_us"] == pytest.approx(1.8) and got["q80_us"] == pytest.approx(4.2)
    assert json.loads(got["samples_us"]) == samples and (got["timer"], got["reps"], got["number"]) == ("t", 5, 7)


def test_timed_fields_times_the_call():
    calls = []
    settings = timing.settings_for(True, cuda=False)
    got = timing.timed_fields(lambda: calls.append(1), settings)
    assert calls and got["reps"] >= settings["min_reps"] and got["median_us"] > 0


def test_compile_is_skipped_only_in_a_quick_run_off_cuda(monkeypatch):
    monkeypatch.setattr(timing.runtime, "cuda_available", lambda: False)
    assert timing.compile_skipped(True) and not timing.compile_skipped(False)
    monkeypatch.setattr(timing.runtime, "cuda_available", lambda: True)
    assert not timing.compile_skipped(True)
    assert "--quick" in timing.COMPILE_SKIPPED and "inductor" in timing.COMPILE_SKIPPED


def test_first_call_s_is_the_calls_time():
    assert 0.05 <= timing.first_call_s(lambda: time.sleep(0.06)) < 1.0


def test_both_runners_take_the_timing_core_from_one_place():
    """Neither runner keeps its own quantile block or compile-skip text (a second copy drifts)."""
    from pathlib import Path

    bench = Path(timing.__file__).parent
    for name in ("harness.py", "opbench.py"):
        text = (bench / name).read_text()
        assert "quantile(s, 0.2)" not in text and "outlasts the quick budget" not in text, name


def test_microsecond_calls_are_timed_again_under_a_cuda_graph_and_say_so():
    """Below ``cudagraph_below_us`` the row's median is the CUDA graph's (one event pair per repetition would add a
    fixed offset to a 2-5 us kernel); do_bench's median and samples are kept beside it. A call that cannot be captured
    keeps its do_bench time and says why. (The graph timer is faked: no CUDA here.)"""
    from fastpath_lib.bench.timing import CUDAGRAPH_TIMER, settings_for, timed_fields

    base = dict(settings_for(True, cuda=False), target_s=0.001, min_reps=2, max_reps=2, warmup_calls=1)
    fast = timed_fields(lambda: None, dict(base, cudagraph_below_us=1e9),
                        graph=lambda fn, s: {"graph_median_us": 2.5})
    assert fast["median_us"] == 2.5 and fast["graph_median_us"] == 2.5 and CUDAGRAPH_TIMER in fast["timer"]
    assert fast["do_bench_median_us"] > 0 and fast["samples_us"] != "[]"
    refused = timed_fields(lambda: None, dict(base, cudagraph_below_us=1e9),
                           graph=lambda fn, s: {"graph_note": "not timed under a CUDA graph: RuntimeError: sync"})
    assert "graph_median_us" not in refused and refused["graph_note"].startswith("not timed under a CUDA graph")
    slow = timed_fields(lambda: None, dict(base, cudagraph_below_us=0.0), graph=lambda fn, s: 1 / 0)
    assert "graph_median_us" not in slow  # above the bound: never asked
    assert settings_for(False, cuda=True)["input_sets"] == 1  # the L2 flush already empties L2: one input set


def test_gpu_state_reads_nvidia_smi_and_records_its_absence():
    import subprocess

    from fastpath_lib.bench.metadata import SMI_FIELDS, gpu_state

    def absent(*a, **k):
        raise FileNotFoundError("nvidia-smi")

    assert gpu_state(run=absent) == {"available": False, "read_at": gpu_state(run=absent)["read_at"],
                                     "why": "nvidia-smi not found on PATH"}
    values = ["NVIDIA H200", "00000000:19:00.0", "P0", "1980 MHz", "1980 MHz", "3201 MHz", "3201 MHz", "112.3 W",
              "700.00 W", "35", "0x0000000000000000", "Disabled", "Enabled", "0 %", "1 MiB", "143771 MiB"]

    def smi(cmd, **k):
        fields = cmd[1].split("=", 1)[1].split(",")
        if "clocks_throttle_reasons.active" in fields and len(fields) > 1:  # a driver that refuses one field
            return subprocess.CompletedProcess(cmd, 2, "", 'Field "clocks_throttle_reasons.active" is not valid')
        if fields == ["clocks_throttle_reasons.active"]:
            return subprocess.CompletedProcess(cmd, 2, "", "not valid")
        return subprocess.CompletedProcess(cmd, 0, ", ".join(values[SMI_FIELDS.index(f)] for f in fields) + "\n", "")

    state = gpu_state(run=smi)
    assert state["available"] and len(state["gpus"]) == 1
    gpu = state["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["clocks.sm"] == "1980 MHz" and gpu["ecc.mode.current"] == "Enabled"
    assert gpu["clocks_throttle_reasons.active"] == "unsupported" and gpu["mig.mode.current"] == "Disabled"
