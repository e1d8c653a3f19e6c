"""Compile cost, workload replay (trace and decoder) and the row sweep take an operator spec (issue 17): the third op
of ``tests/bench/test_pr_templates.py``, with the two spec fields these parts need, gets each of them on tiny shapes,
and a spy proves its own callables ran (a part that ignored the spec and timed RMSNorm would fail here). CPU,
seconds."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

from fastpath_lib import opspec, runtime
from fastpath_lib.bench import sweep, trace, workload
from fastpath_lib.bench.schema import NOT_GPU
from fastpath_lib.bench.timing import gpu_measurement
from tests.bench.test_pr_templates import L2, l2_normalize

SPIED: list[str] = []


def _spy(name, fn):
    def call(*args):
        SPIED.append(name)
        return fn(*args)
    return call


def _binary(rows, cols, dtype):
    """One binary per width class: a narrow one up to 64 columns, a wide one above (the test op's made-up rule)."""
    SPIED.append("specialization")
    return {"kernel": "l2_fwd", "dtype": str(dtype), "BLOCK": 64 if cols <= 64 else 128} if cols <= 128 else None


def _step(fn, delta, residual, weight, eps):
    s = residual + delta
    return fn(s) * weight, s


#: The third op, spied on, with a fast route, a specialization rule and a decoder step (module level: a fresh
#: process finds it by :func:`fastpath_lib.opspec.source`).
THIRD = dataclasses.replace(
    L2, name="row_l2_workload_test", function=_spy("function", l2_normalize),
    baselines={"F.normalize": _spy("baseline", L2.baselines["F.normalize"])}, fast=_spy("fast", l2_normalize),
    cases=[*L2.cases, opspec.OpCase("mid", 32, 96, "float32", "win", "a second width class", quick=(8, 96)),
           opspec.OpCase("narrow16", 16, 64, "float16", "win", "the narrow class again", quick=(4, 64))],
    specialization=_binary, decoder_step=_step, calls_per_forward=lambda layers: layers + 3)


@pytest.fixture
def third():
    SPIED.clear()
    opspec.register(THIRD)
    yield THIRD
    opspec.unregister(THIRD.name)


def test_compile_cost_counts_the_ops_own_specializations(third):
    cc = workload.compile_cost(spec=third, quick=True)
    assert cc["op"] == third.name and "specialization" in SPIED
    # narrow (64, fp32) and narrow16 (64, fp16) are two dtypes, mid is the wide class; 'wide' is a predicted fallback
    assert cc["specializations"] == 3 == len(cc["list"])
    assert [s["cases"] for s in cc["list"]] == [["narrow"], ["mid"], ["narrow16"]]
    assert {s["BLOCK"] for s in cc["list"]} == {64, 128}
    if not gpu_measurement():
        assert cc["compiles"] is False and "not compiled" in cc["note"] and "per_specialization" not in cc


def test_compile_cost_of_a_spec_without_the_rule_says_so():
    cc = workload.compile_cost(spec=L2)
    assert cc["declared"] is False and cc["specializations"] is None and opspec.NOT_DECLARED in cc["note"]


def test_a_fresh_process_finds_a_spec_by_its_source(third):
    assert opspec.source(third).endswith("test_op_workload:THIRD")  # as pytest imported this file
    assert opspec.source(opspec.get("fused_add_rms_norm")) == "fastpath_lib.fused.op_spec:SPEC"
    code = "import importlib, sys; m, a = sys.argv[1].split(':'); print(getattr(importlib.import_module(m), a).name)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # as compile_cost's probe gets
    res = subprocess.run([sys.executable, "-c", code, opspec.source(third)], capture_output=True, text=True,
                         cwd=runtime.ROOT, env=env, timeout=120)
    assert res.stdout.strip() == third.name, res.stderr[-500:]


def test_fused_op_compile_cost_counts_its_forward_binaries():
    cc = workload.compile_cost(spec=opspec.get("fused_add_rms_norm"))
    assert cc["specializations"] == len({json.dumps({k: v for k, v in s.items() if k not in ("rows", "cols", "cases")})
                                         for s in cc["list"]}) >= 2
    assert all(s["kernel"] == "fused_forward" for s in cc["list"])
    assert "odd_4096x4095_fp16" not in {c for s in cc["list"] for c in s["cases"]}  # a predicted fallback


def test_compile_cost_adds_the_backward_binaries_where_the_spec_declares_fast_backward():
    """RMSNorm's spec declares ``fast_backward`` and a ``specialization`` taking ``kernel``: its backward cases add
    their backward binaries, launched through ``fast_backward``; the same spec without it counts forward binaries
    only (nothing here reads the op by name)."""
    spec = opspec.get("rms_norm")
    cc = workload.compile_cost(spec=spec)
    bwd = [s for s in cc["list"] if s["launch"] == "fast_backward"]
    backward_cases = {c.id for c in spec.matrix() if c.pass_ == "backward" and c.expected != "fallback"}
    assert bwd and {s["kernel"] for s in bwd} == {"bwd"} and {c for s in bwd for c in s["cases"]} <= backward_cases
    fwd_only = workload.compile_cost(spec=dataclasses.replace(spec, fast_backward=None))
    assert {s["launch"] for s in fwd_only["list"]} == {"fast"}
    assert fwd_only["specializations"] == cc["specializations"] - len(bwd)


def test_trace_replay_times_the_ops_function_against_its_baseline(third):
    calls = [trace.TraceCall("decode", 2, 64, torch.float32, 30), trace.TraceCall("prefill", 8, 256, torch.float32, 3)]
    df = trace.replay_trace(calls, spec=third, quick=True, rounds=1)
    tot = df.attrs["totals"]
    assert list(df.columns) == trace.TRACE_COLUMNS and (tot["op"], tot["baseline"]) == (third.name, "F.normalize")
    assert list(df.route) == ["triton", "fallback"]  # the third op's predicate: at most 128 columns
    assert {"function", "baseline"} <= set(SPIED)
    assert NOT_GPU in tot["label"] and tot["calls"] == 33
    if not gpu_measurement():
        assert df.status[0].startswith("not measured") and df.status[1] == "ok" and tot["measured_calls"] == 3


def test_serving_trace_counts_the_ops_own_calls_per_forward(third, tmp_path):
    def counts(spec):
        return [c.count for c in trace.serving_trace(layers=4, prompt_tokens=8, decode_steps=3, spec=spec)]
    assert counts(None) == counts(opspec.get("rms_norm")) == [9, 27]  # 2 * layers + 1: no field, the default
    assert counts(opspec.get("fused_add_rms_norm")) == [8, 24]  # layer 0's input norm has no residual yet
    assert counts(third) == [7, 21]
    # the evidence run's replay step counts the op's calls (32 layers, 1 prefill + 128 decode forwards)
    import time

    from fastpath_lib.bench.evidence_steps import replay as op_replay
    from fastpath_lib.bench.step_process import StepContext
    op_replay(StepContext(out=tmp_path, budget_s=60, started=time.monotonic(), op=third.name))
    saved = json.loads((tmp_path / "ops" / third.name / "replay.json").read_text())
    assert saved["trace"]["totals"]["calls"] == (32 + 3) * 129


def test_decoder_replay_puts_the_op_where_the_norms_are(third):
    res = workload.replay(spec=third, quick=True)
    assert (res["op"], res["baseline"]) == (third.name, "F.normalize") and res["logits_close"]
    assert sum(res["fast_model_routes"].values()) == res["norm_calls_per_forward"] == 5
    assert SPIED.count("function") >= 5 and "baseline" in SPIED
    if not gpu_measurement():
        assert res["e2e_fastpath_us"] is None and NOT_GPU in res["label"] and res["e2e_baseline_us"] > 0


def test_decoder_replay_of_a_spec_without_a_step_says_so():
    res = workload.replay(spec=L2, quick=True)
    assert res["declared"] is False and opspec.NOT_DECLARED in res["note"] and "e2e_baseline_us" not in res


def test_sweep_times_the_ops_dispatched_call_against_its_baseline(third):
    df = sweep.threshold_sweep(rows=[2, 4], cols=[64], dtype=torch.float32, spec=third, quick=True, blocks=2)
    assert list(df.provider) == ["baseline", "dispatched"] * 2 and (df.status == "ok").all()
    assert {"function", "baseline"} <= set(SPIED)
    assert (df.timer == sweep.HOST_TIMER).all() and set(df[df.provider == "dispatched"].route) <= {"triton", "fallback"}
    prop = df.attrs["proposal"]
    assert (prop["op"], prop["baseline"]) == (third.name, "F.normalize")
    if not gpu_measurement():
        assert prop["proposed_min_rows"] is None and NOT_GPU in prop["reason"]


def test_sweep_of_a_spec_without_a_fast_route_says_so():
    df = sweep.threshold_sweep(rows=[2], cols=[64], spec=L2, quick=True)
    assert len(df) == 0 and opspec.NOT_DECLARED in df.attrs["proposal"]["reason"]


def test_an_ops_sweep_is_not_recorded_as_rmsnorms_threshold(tmp_path):
    (tmp_path / "environment.json").write_text(json.dumps({"op": "fused_add_rms_norm"}))
    (tmp_path / "threshold.csv").write_text(",".join(sweep.SWEEP_COLUMNS) + "\n")
    with pytest.raises(ValueError, match="declares no thresholds record"):
        sweep.threshold_from_results(tmp_path)


@pytest.mark.gpu
def test_compile_cost_on_cuda_compiles_each_fused_binary_in_a_fresh_process():
    if not gpu_measurement():
        pytest.skip("needs CUDA without the interpreter")
    cc = workload.compile_cost(spec=opspec.get("fused_add_rms_norm"), quick=True)
    assert not cc.get("error"), cc.get("error")
    assert cc["compiles"] and len(cc["per_specialization"]) == cc["specializations"] and cc["cache_bytes"] > 0
    assert all(p["first_call_s"] > p["second_call_s"] for p in cc["per_specialization"])
