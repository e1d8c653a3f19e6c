"""The CUDA-graph capture record (issue 17 item 4): the record's reading, the predicate's ``cuda_graph_capture``
condition over it, the ``capture`` command, and the step in the evidence plan. Capturing and the architecture are
SIMULATED here (patched, as tests/rmsnorm/test_thresholds.py does for thresholds); the capture itself is
tests/test_gpu.py's.
"""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path

import pytest
import torch

from fastpath_lib.rmsnorm import graph_capture as step
from fastpath_lib.bench import evidence
from fastpath_lib.rmsnorm import capture, predicate

SM90 = (9, 0)
#: What an eager capture test of rms_norm on sm_90 records (the only thing a record without ``ops`` vouches for).
RMS_EAGER = (SM90, "rms_norm", "eager")


def captured_call(capability=SM90, capturing=True):
    """An eligible call as the predicate would see it on a CUDA device of ``capability`` during capture."""
    x = torch.randn(16, 64)
    call = predicate.make_call(x, [64], torch.ones(64))
    return dataclasses.replace(call, device_type="cuda", interpret=False, capability=capability, capturing=capturing)


def failed(call) -> list[str]:
    return predicate.PREDICATE.evaluate(call).failed


def test_the_shipped_record_verifies_nothing_until_a_gpu_run_writes_it():
    assert capture.entries() == {} and capture.VERIFIED == frozenset()
    assert "cuda_graph_capture" in failed(captured_call())


def test_reading_the_record(tmp_path):
    f = tmp_path / "capture.json"
    assert capture.load(f) == frozenset()
    capture.record("sm_90", True, "results/sim-sm90", path=f, device_name="simulated GPU")
    capture.record("sm_80", False, "results/sim-sm80", path=f)
    assert capture.load(f) == {RMS_EAGER}  # only the architecture whose test passed (an entry without ops: eager)
    assert capture.entries(f)["sm_80"] == {"passed": False, "source": "results/sim-sm80"}
    data = json.loads(f.read_text())
    assert list(data) == ["_about", "sm_80", "sm_90"] and data["sm_90"]["device_name"] == "simulated GPU"
    capture.record("sm_90", False, "results/sim-sm90-again", path=f)  # a later run replaces the entry
    assert capture.load(f) == frozenset()


@pytest.mark.parametrize("text, match", [
    ("not json", "not valid JSON"), ("[]", "JSON object"), ('{"sm_90": {"passed": "yes", "source": "r"}}', "boolean"),
    ('{"sm_90": {"passed": true}}', "source"), ('{"hopper": {"passed": true, "source": "r"}}', "sm_XY")])
def test_a_bad_record_is_refused_with_its_reason(tmp_path, text, match):
    f = tmp_path / "capture.json"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        capture.load(f)


def test_the_condition_reads_the_record(monkeypatch):
    assert "cuda_graph_capture" in failed(captured_call())
    monkeypatch.setattr(capture, "VERIFIED", frozenset({RMS_EAGER}))
    assert "cuda_graph_capture" not in failed(captured_call())
    reason = predicate.PREDICATE.check_one("cuda_graph_capture", captured_call((8, 0)))
    assert "sm_80" in reason and "capture.json" in reason  # another architecture still falls back
    assert predicate.PREDICATE.check_one("cuda_graph_capture", captured_call(None)) is not None
    assert "cuda_graph_capture" not in failed(captured_call((8, 0), capturing=False))


def test_the_run_time_decision_reads_the_record(monkeypatch):
    """``runtime_eligible`` (the dispatch's own check, also inside the compiled op) on a simulated CUDA input."""
    fake = types.SimpleNamespace(is_cuda=True, device=torch.device("cuda", 0), data_ptr=lambda: 4096)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    monkeypatch.setattr(predicate, "device_capability", lambda dev: SM90)
    assert predicate.runtime_eligible(fake, None) is False
    monkeypatch.setattr(capture, "VERIFIED", frozenset({RMS_EAGER}))
    assert predicate.runtime_eligible(fake, None) is True
    monkeypatch.setattr(predicate, "device_capability", lambda dev: (8, 6))
    assert predicate.runtime_eligible(fake, None) is False
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    assert predicate.runtime_eligible(fake, None) is True


def test_capturing_is_false_off_cuda_and_when_the_query_fails(monkeypatch):
    assert capture.capturing(torch.device("cpu")) is False
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert capture.capturing(torch.device("cuda", 0)) is True

    def broken():
        raise RuntimeError("no driver")

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", broken)
    assert capture.capturing(torch.device("cuda", 0)) is False


def test_assume_verified_restores_the_record():
    before = capture.VERIFIED
    with pytest.raises(KeyError), step.assume_verified(SM90):
        assert capture.verified(SM90)
        raise KeyError("inside")
    assert capture.VERIFIED is before and not capture.verified(SM90)


# --- the results folder and the command (SIMULATED capture results, constructed here, never measured) ---------------

def row(case, route, phase, ok=True):
    return {"case": case, "phase": phase, "expected_route": route, "captured_route": route, "ok": ok,
            "problems": [] if ok else ["replay 1 output: 3/64 elements outside atol"]}


def simulated_rows(ok=True):
    return [row(f"{r}x4096 float32", route, phase, ok or route == "fallback") for r, route in ((1023, "fallback"),
            (1024, "triton")) for phase in ("forward", "forward+backward")]


def simulated_run(folder: Path, *, ok=True, gpu=True, passed=None, cap="sm_90", rows=None) -> Path:
    rows = simulated_rows(ok) if rows is None else rows
    passed = step.verdict(rows, len(rows))[0] if passed is None else passed
    folder.mkdir(parents=True)
    (folder / step.RESULTS_NAME).write_text(json.dumps({
        "compute_capability": cap, "device_name": "simulated GPU", "passed": passed, "why": "", "cases": rows,
        "declared_cases": len(rows), "gpu_measurement": gpu, "git_commit": "0" * 40, "timestamp": "2026-12-03"}))
    return folder


def test_verdict_needs_every_case_both_routes_and_both_phases():
    assert step.verdict(simulated_rows(), 4)[0]
    ok, why = step.verdict(simulated_rows(ok=False), 4)
    assert not ok and "captures failed" in why and "1024x4096" in why
    ok, why = step.verdict(simulated_rows(), 5)
    assert not ok and "incomplete" in why
    only_fallback = [r for r in simulated_rows() if r["expected_route"] == "fallback"]
    ok, why = step.verdict(only_fallback, 2)
    assert not ok and "triton" in why


def test_capture_command_records_a_passed_run(tmp_path, capsys):
    run = simulated_run(tmp_path / "results" / "sim-sm90")
    target = tmp_path / "capture.json"
    assert step.capture_main([str(run), "--file", str(target)]) == 0
    entry = capture.entries(target)["sm_90"]
    assert entry["passed"] is True and entry["cases"] == 4 and entry["device_name"] == "simulated GPU"
    assert entry["source"].endswith("results/sim-sm90") and capture.load(target) == {RMS_EAGER}
    assert "sm_90: capture test passed" in capsys.readouterr().out


def test_capture_command_records_a_failed_run_and_check_writes_nothing(tmp_path):
    target = tmp_path / "capture.json"
    bad = simulated_run(tmp_path / "bad", ok=False)
    assert step.capture_main([str(bad), "--file", str(target), "--check"]) == 1 and not target.exists()
    assert step.capture_main([str(bad), "--file", str(target)]) == 1
    assert capture.entries(target)["sm_90"]["passed"] is False and capture.load(target) == frozenset()


@pytest.mark.parametrize("kind", ["missing", "not gpu", "verdict disagrees", "bad arch"])
def test_capture_command_refuses_what_it_cannot_trust(tmp_path, kind, capsys):
    folder = tmp_path / "run"
    if kind == "missing":
        folder.mkdir()
    else:
        simulated_run(folder, gpu=kind != "not gpu", passed=False if kind == "verdict disagrees" else None,
                      cap="gpu" if kind == "bad arch" else "sm_90")
    target = tmp_path / "capture.json"
    assert step.capture_main([str(folder), "--file", str(target)]) == 2 and not target.exists()
    assert capsys.readouterr().out.startswith("error:")


def test_the_capture_step_is_in_the_evidence_plan():
    (entry,) = [s for s in evidence.STEPS if s.name == "capture"]
    assert entry.target == "fastpath_lib.bench.capture:step" and "capture_test.json" in entry.writes
    lines = []
    evidence.dry_run(steps=(entry,), collect=False, out=lines.append)
    assert any("capture" in line and "capture_test.json" in line for line in lines), lines


def test_the_cases_cover_both_routes_and_both_phases():
    cases = step.capture_cases(1024)
    routes = {(s.rows >= 1024 and s.cols % 4 == 0, backward) for s, backward in cases}
    assert routes == {(True, True), (True, False), (False, True), (False, False)}
    assert any(s.cols == predicate.MAX_COLS for s, _ in cases) and any(s.weight is None for s, _ in cases)


# --- per op and per path ---------------------------------------------------------------------------------------------

def test_a_pass_is_per_op_and_per_path_and_the_fused_op_inherits_nothing(monkeypatch):
    """rms_norm's eager pass lets neither its custom op nor the fused op take the fast path under capture; the backward
    (shared by both paths) needs either path's pass."""
    from fastpath_lib.fused import predicate as fused_predicate

    monkeypatch.setattr(capture, "VERIFIED", frozenset({RMS_EAGER}))
    assert capture.verified(SM90) and capture.verified(SM90, "rms_norm", None)
    assert not capture.verified(SM90, "rms_norm", "custom_op")
    assert not capture.verified(SM90, "fused_add_rms_norm", "eager")
    assert not capture.verified(SM90, "fused_add_rms_norm", None)
    fake = types.SimpleNamespace(is_cuda=True, device=torch.device("cuda", 0), data_ptr=lambda: 4096, dim=lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    monkeypatch.setattr(predicate, "device_capability", lambda dev: SM90)
    assert predicate.runtime_eligible(fake, None) is True
    assert predicate.runtime_eligible(fake, None, path="custom_op") is False
    assert fused_predicate.runtime_eligible(fake, fake, None, False) is False  # not rms_norm's record
    monkeypatch.setattr(capture, "VERIFIED", frozenset({(SM90, "fused_add_rms_norm", "custom_op")}))
    assert fused_predicate.runtime_eligible(fake, fake, None, False, "custom_op") is True
    assert fused_predicate.runtime_eligible(fake, fake, None, False) is False  # its eager path did not pass
    assert predicate.runtime_eligible(fake, None) is False


def per_path_rows(fused_custom_ok=True):
    rows = []
    for path in capture.PATHS:
        rows += [dict(r, op="rms_norm", path=path) for r in simulated_rows()]
        for r, route in ((1023, "fallback"), (1024, "triton")):
            for phase in ("forward", "in-place"):
                ok = fused_custom_ok or path == "eager" or route == "fallback"
                rows.append(dict(row(f"{r}x4096 float32", route, phase, ok), op="fused_add_rms_norm", path=path))
    return rows


def test_the_command_records_each_op_and_path_on_its_own(tmp_path, capsys):
    rows = per_path_rows(fused_custom_ok=False)
    declared = {op: {p: 4 for p in capture.PATHS} for op in ("rms_norm", "fused_add_rms_norm")}
    per = step.verdicts(rows, declared)
    assert per["fused_add_rms_norm"]["custom_op"]["passed"] is False and per["rms_norm"]["custom_op"]["passed"]
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / step.RESULTS_NAME).write_text(json.dumps({
        "compute_capability": "sm_90", "device_name": "NVIDIA H200", "passed": False, "why": "", "cases": rows,
        "declared_cases": len(rows), "declared": declared, "gpu_measurement": True}))
    target = tmp_path / "capture.json"
    assert step.capture_main([str(folder), "--file", str(target)]) == 1  # not everything passed
    assert capture.load(target) == {RMS_EAGER, (SM90, "rms_norm", "custom_op"), (SM90, "fused_add_rms_norm", "eager")}
    out = capsys.readouterr().out
    assert "fused_add_rms_norm: eager passed, custom_op FAILED" in out
    assert capture.entries(target)["sm_90"]["device_name"] == "NVIDIA H200"
    # a fused case that never ran leaves its path incomplete
    short = [r for r in rows if not (r["op"] == "fused_add_rms_norm" and r["phase"] == "in-place")]
    assert "incomplete" in step.verdicts(short, declared)["fused_add_rms_norm"]["eager"]["why"]


def test_the_fused_cases_cover_both_routes_both_forms_and_assume_verified_restores():
    cases = step.fused_capture_cases(1024)
    assert {(s.rows >= 1024 and s.cols % 4 == 0, inplace) for s, inplace in cases} == {
        (True, True), (True, False), (False, True), (False, False)}
    before = capture.VERIFIED
    with step.assume_verified(SM90):
        assert all(capture.verified(SM90, op, p) for op in ("rms_norm", "fused_add_rms_norm") for p in capture.PATHS)
    assert capture.VERIFIED is before
