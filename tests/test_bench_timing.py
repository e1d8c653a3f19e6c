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
