"""Fused residual-add + RMSNorm through the generic bench pipeline (issue 18 item 4): its predeclared matrix, the
tuple output checked output by output (the new residual bitwise), every baseline timed with the bytes of its own
implementation, and its kernels' compiled facts. CPU timings here are never a GPU measurement."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import pytest
import torch

import fastpath_lib
from fastpath_lib import opspec
from fastpath_lib.bench.opbench import run_op
from fastpath_lib.bench.schema import (
    FALLBACK, LOSS, NEUTRAL, NO_BANDWIDTH, OUTCOMES, UNMEASURED, WIN, is_gpu_measurement,
)
from fastpath_lib.bench.timing import settings_for
from fastpath_lib.fused import op_spec
from fastpath_lib.fused.cases import FusedCaseSpec
from fastpath_lib.rmsnorm.limits import DEFAULT_CUDA_MIN_ROWS, MAX_COLS

SPEC = opspec.get("fused_add_rms_norm")
DECODE, PREFILL = "decode_m1_4096_bf16", "prefill_2048x2048_fp16"  # a fallback and the smallest Triton quick shape
#: the quick settings with the fewest samples: these tests read rows and bytes, not speed
FAST = dict(settings_for(True), target_s=0.0, min_reps=1, max_reps=1, warmup_calls=1, input_sets=1)


def _rows(df):
    return {(r.case_id, r.provider): r for r in df.itertuples()}


def _passes_bytes(rows, cols, passes, esize):
    return passes * rows * cols * esize + cols * esize  # plus the weight, read once


def test_matrix_is_declared_as_a_reviewer_needs_it():
    cases = SPEC.matrix()
    assert len(cases) >= 12 and all(c.expected in OUTCOMES for c in cases)
    count = Counter(c.expected for c in cases)  # lesson 05's rule: wins, cases not expected to improve, fallbacks
    assert count[WIN] >= 1 and count[NEUTRAL] + count[LOSS] >= 2 and count[FALLBACK] >= 2, count
    assert all(len(c.rationale) > 40 for c in cases)
    assert any(c.rows == 1 for c in cases) and {c.dtype for c in cases} == {"float16", "bfloat16", "float32"}
    for c in cases:  # the predictions follow the CUDA predicate's limits at the declared shape (no recorded sweep)
        esize = torch.empty((), dtype=getattr(torch, c.dtype)).element_size()
        outside = c.rows < DEFAULT_CUDA_MIN_ROWS or c.cols > MAX_COLS or c.cols * esize % 16
        assert (c.expected == FALLBACK) == bool(outside), c.id
        # and the quick shape keeps the case on its side of the predicate here (interpreter limits)
        built = SPEC.args(FusedCaseSpec(rows=c.dims(True)[0], cols=c.dims(True)[1], dtype=getattr(torch, c.dtype),
                                        device="cpu").build(seed=1))
        assert SPEC.route(*built) == ("fallback" if outside else "triton"), c.id


def test_quick_matrix_times_every_baseline_with_the_bytes_of_its_implementation():
    df = run_op(SPEC, quick=True, only=[DECODE, PREFILL], settings=FAST)
    by = _rows(df)
    providers = {"baseline", "compiled", "add_then_kit_rms_norm", "vllm_c", "dispatched", "triton"}
    assert {p for c, p in by if c == PREFILL} == providers == {p for c, p in by if c == DECODE}
    env = df.attrs["environment"]
    assert env["baselines"] == ["unfused_eager", "compiled", "add_then_kit_rms_norm", "vllm_c"]
    assert "in-place" in env["op_note"]
    for cid in (DECODE, PREFILL):
        rows, cols = next(c for c in SPEC.matrix() if c.id == cid).dims(True)
        esize = 2
        fused, unfused = _passes_bytes(rows, cols, 4, esize), _passes_bytes(rows, cols, 5, esize)
        assert by[(cid, "baseline")].bytes_moved == unfused and "unfused_eager" in by[(cid, "baseline")].note
        assert by[(cid, "add_then_kit_rms_norm")].bytes_moved == unfused
        assert by[(cid, "compiled")].bytes_moved == fused
        assert by[(cid, "compiled")].status == "skipped" and "quick" in by[(cid, "compiled")].note  # CPU, quick
        assert by[(cid, "vllm_c")].bytes_moved == _passes_bytes(rows, cols, 8, esize)  # clones, then the kernel
        if not torch.cuda.is_available():  # vLLM's CUDA kernel: the row says why it did not run
            assert by[(cid, "vllm_c")].status == "skipped"
            assert by[(cid, "vllm_c")].note == ("vllm_c not run: vLLM's CUDA kernel needs CUDA tensors (this run's "
                                                "are on cpu)")
        for p in ("baseline", "add_then_kit_rms_norm", "dispatched"):
            assert by[(cid, p)].status == "ok" and by[(cid, p)].median_us > 0, (cid, p)
    # the dispatched call moves what its route moves: 5 passes on the fallback, 4 on the fused kernel
    assert by[(DECODE, "dispatched")].route == "fallback" and by[(DECODE, "triton")].status == "skipped"
    assert by[(DECODE, "dispatched")].bytes_moved == by[(DECODE, "baseline")].bytes_moved
    assert by[(PREFILL, "dispatched")].route == "triton" and by[(PREFILL, "triton")].status == "ok"
    assert by[(PREFILL, "triton")].bytes_moved == by[(PREFILL, "dispatched")].bytes_moved == _passes_bytes(8, 128, 4, 2)
    assert "saves 2048 bytes against unfused_eager" in by[(PREFILL, "triton")].note  # one pass of 8 x 128 fp16
    if fastpath_lib.runtime.interpreter_enabled():  # the fused kernel counted at 4 passes plus the weight, one launch
        for p in ("triton", "dispatched"):
            r = by[(PREFILL, p)]
            assert (r.counted_bytes, r.oob_accesses, r.launches_per_call) == (_passes_bytes(8, 128, 4, 2), 0, 1)
        kit = by[(PREFILL, "add_then_kit_rms_norm")]  # the eager add is no Triton launch: only the norm is counted
        assert (kit.counted_bytes, kit.launches_per_call) == (_passes_bytes(8, 128, 2, 2), 1)
        assert by[(PREFILL, "baseline")].counted_bytes != by[(PREFILL, "baseline")].counted_bytes  # NaN: no Triton
    if is_gpu_measurement(df, env):
        assert by[(PREFILL, "triton")].gbps == pytest.approx(by[(PREFILL, "triton")].bytes_moved
                                                              / by[(PREFILL, "triton")].median_us / 1e3)
    else:  # a CPU timing gives no GPU bandwidth: empty, the note says why
        assert math.isnan(by[(PREFILL, "triton")].gbps) and NO_BANDWIDTH in by[(PREFILL, "triton")].note
        assert by[(PREFILL, "dispatched")].observed == UNMEASURED and by[(DECODE, "dispatched")].observed == FALLBACK


def _nudged_residual(x, residual, weight=None, eps=None):
    """The output right, the new residual one ulp off on one element: inside the output's tolerance, not bitwise."""
    out, s = fastpath_lib.fused_add_rms_norm(x, residual, weight, eps)
    s = s.clone()
    s.view(-1).view(torch.int16)[3] += 1  # the next fp16 value: one unit in the last place
    return out, s


def _rounded_twice(x, residual, weight=None, eps=None):
    """The output scaled by one part in a hundred (outside the output's tolerance), the residual right."""
    out, s = fastpath_lib.fused_add_rms_norm(x, residual, weight, eps)
    return out * 1.01, s


def _in_place(x, residual, weight=None, eps=None):
    return fastpath_lib.fused_add_rms_norm_(x, residual, weight, eps)


@pytest.mark.parametrize("wrong, why", [(_nudged_residual, "output 1: max error"),
                                        (_rounded_twice, "output 0: max error"),
                                        (_in_place, "wrote into its input")])
def test_a_wrong_output_or_an_input_written_is_caught_before_timing(wrong, why):
    """The wrong function's own row is refused untimed with the reason; the rows that do not call it still run."""
    df = run_op(dataclasses.replace(SPEC, function=wrong), quick=True, only=[PREFILL], settings=FAST)
    row = df.set_index("provider").loc["dispatched"]
    assert row["status"] == "error" and why in row["note"], row["note"]
    assert row["median_us"] != row["median_us"]  # NaN: never timed
    others = df[df["provider"] != "dispatched"]
    assert set(others["status"]) <= {"ok", "skipped"} and (others["provider"] == "baseline").any()


def test_residual_tolerance_is_bitwise_and_the_output_one_ulp():
    """The op's own routes: one ulp. Its baselines: the op's atol, its rtol plus one rounding of the sum to the dtype
    (relative u = eps/2) carried through the normalization, 2u/(1-u); fp32's sum is not rounded again."""
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        out_tol, res_tol = SPEC.output_tolerances(dtype, 2)
        assert res_tol == (0.0, 0.0) and out_tol == fastpath_lib.fused.reference.TOLERANCES[dtype]
        (atol, rtol), res_tol = SPEC.output_tolerances(dtype, 2, baseline=True)
        u = torch.finfo(dtype).eps / 2 if dtype != torch.float32 else 0.0
        assert res_tol == (0.0, 0.0) and (atol, rtol) == pytest.approx((out_tol[0], out_tol[1] + 2 * u / (1 - u)))


def _vllm_rounding(x, residual, weight=None, eps=None):
    """vLLM's CUDA kernel's rounding points (``fused_add_rms_norm_kernel``, csrc/layernorm_kernels.cu): the sum
    stored in x's dtype, then mean square, scaling, weight and output from that rounded sum as the contract does."""
    h = x + residual
    return fastpath_lib.fused.reference.native(h, torch.zeros_like(h), weight, eps)


def _not_normalized(x, residual, weight=None, eps=None):
    """Another function: the sum times the weight, never normalized."""
    h = x + residual
    return (h * weight).to(x.dtype), h


def _eps_too_large(x, residual, weight=None, eps=None):
    """Another function: the contract with eps 0.1 in place of the call's 1e-6 (on rows whose mean square is about
    2, a few percent; an eps error below the dtype's precision is no different function at that precision)."""
    return fastpath_lib.fused.reference.native(x, residual, weight, 0.1)


def test_baselines_that_round_the_sum_are_timed_and_another_function_is_refused():
    """On every case of the quick matrix (its first input set, as the bench checks it), vLLM's rounding points pass
    the baseline tolerances, though the op's own one-ulp tolerance would refuse them on wide rows; so does the kit's
    unfused pair on the widest eligible row (the quick matrix test times it on two more cases). A baseline that does
    not normalize, or uses another eps, is refused with its error (on the first case of each dtype)."""
    from fastpath_lib.bench.opbench import _input_sets, baseline_differs

    needs_the_bound, dtypes_seen = [], set()
    for case in SPEC.matrix():
        inputs, dtype = _input_sets(SPEC, case, True, 1, "cpu")[0], getattr(torch, case.dtype)
        assert baseline_differs(SPEC, case, "vllm_rounding", _vllm_rounding, inputs, dtype) is None, case.id
        got, want = _vllm_rounding(*inputs[0])[0], fastpath_lib.fused.reference.native(*inputs[0])[0]
        atol, rtol = SPEC.output_tolerances(dtype, 2)[0]  # what the op's own routes are held to
        if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol):
            needs_the_bound.append(case.id)
        for wrong in (_not_normalized, _eps_too_large) if dtype not in dtypes_seen else ():
            why = baseline_differs(SPEC, case, wrong.__name__, wrong, inputs, dtype)
            assert why and f"baseline {wrong.__name__} differs" in why and "output 0: max error" in why, (case.id, why)
        dtypes_seen.add(dtype)
        if case.id == f"wide_2048x{MAX_COLS}_bf16":
            kit = SPEC.baselines["add_then_kit_rms_norm"]
            assert baseline_differs(SPEC, case, "add_then_kit_rms_norm", kit, inputs, dtype) is None
    assert f"wide_2048x{MAX_COLS}_bf16" in needs_the_bound and "prefill_4096x5120_fp16" in needs_the_bound
    assert not any("fp32" in c for c in needs_the_bound), needs_the_bound  # fp32: no second rounding
    assert len(dtypes_seen) == 3


def test_bytes_model_saves_one_pass():
    for rows, cols, dtype in ((1, 4096, torch.bfloat16), (16384, 4096, torch.float32)):
        esize = torch.empty((), dtype=dtype).element_size()
        assert op_spec.unfused_bytes(rows, cols, dtype) - op_spec.fused_bytes(rows, cols, dtype) == rows * cols * esize
        assert SPEC.bytes_for("unfused_eager", rows, cols, dtype) == _passes_bytes(rows, cols, 5, esize)
        assert SPEC.bytes_for("triton", rows, cols, dtype) == _passes_bytes(rows, cols, 4, esize)


def test_kernel_list_matches_the_kernels_and_one_compiles_for_sm90():
    from fastpath_lib.fused import kernels
    from fastpath_lib.rmsnorm import compiled

    builds = SPEC.kernels()
    widths = {c.cols for c in SPEC.matrix() if c.expected != FALLBACK}
    assert {b.block for b in builds} >= {1 << (w - 1).bit_length() for w in widths}
    assert {(b.kernel, b.arch) for b in builds} == {(k, a) for k in ("fused_forward", "fused_backward")
                                                    for a in (80, 90)}
    for b in builds:  # the signature is the kernel's own argument list, in order
        fn = kernels.fused_add_rms_norm_fwd_kernel if b.kernel == "fused_forward" else \
            kernels.fused_add_rms_norm_bwd_kernel
        assert [n for n, _ in b.signature] == list(fn.arg_names), b.label
    if compiled.missing_tools():
        pytest.skip(f"cannot compile for a GPU target: {compiled.missing_tools()}")
    (small,) = op_spec.specializations([128], archs=(90,), dtypes=("float16",), kernels=("forward",))
    (row,) = compiled.facts([small], timeout=300)
    assert (row["kernel"], row["arch"], row["vec"]) == ("fused_forward", "sm_90", 8)
    assert row["load_bytes"] == row["store_bytes"] == 16  # every global access a 16-byte vector
    assert row["registers"] > 0 and row["spills"] == 0


def record_op(ctx):
    """A step target (run by ``child_main`` below): reports the op it was given."""
    return {"status": "ran", "why": f"op={ctx.op}"}


def test_evidence_steps_get_their_op_and_write_its_matrix_under_ops(tmp_path):
    import json
    import time

    from fastpath_lib.bench import evidence_steps
    from fastpath_lib.bench.results import load_results

    result = tmp_path / "r.json"
    with pytest.raises(SystemExit):
        evidence_steps.child_main(["tests.fused.test_fused_bench:record_op", str(tmp_path), "5", str(result),
                                   "fused_add_rms_norm"])
    assert json.loads(result.read_text())["why"] == "op=fused_add_rms_norm"
    # a budget already spent: every case is declared, none starts (the full matrix is the GPU run's)
    ctx = evidence_steps.StepContext(out=tmp_path, budget_s=1.0, started=time.monotonic(), op="fused_add_rms_norm")
    res = evidence_steps.matrix(ctx)
    df, env = load_results(tmp_path / "ops" / "fused_add_rms_norm")
    assert env["op"] == "fused_add_rms_norm" and env["evidence_run"] and set(df["status"]) == {"not run"}
    assert set(df["case_id"]) == {c.id for c in SPEC.matrix()} and "0 of 13" in res["why"]


def test_host_family_times_both_forms_on_fallback_calls_only():
    import pandas as pd

    from fastpath_lib.bench.analysis import classify
    from fastpath_lib.bench.host import host_table
    from fastpath_lib.bench.ophost import host_cases, measure_host_op

    assert [c.id for c in host_cases(SPEC)] == ["host_decode_m1_4096_bf16", "host_decode_b16_4096_bf16"]
    assert host_cases(SPEC) == list(SPEC.host_cases)  # declared in the op's spec
    rows = pd.DataFrame(measure_host_op(SPEC, rounds=1, vllm=False))
    by = _rows(rows)
    for cid in ("host_decode_m1_4096_bf16", "host_decode_m1_4096_bf16_inplace"):  # M=1: the fallback everywhere
        assert by[(cid, "dispatched")].route == "fallback" and by[(cid, "dispatched")].median_us > 0
        assert by[(cid, "baseline")].status == "ok" and by[(cid, "baseline")].family == "host-overhead"
    assert "inplace composite" in by[("host_decode_m1_4096_bf16_inplace", "baseline")].note
    assert "unfused_eager" in by[("host_decode_m1_4096_bf16", "baseline")].note
    b16 = by[("host_decode_b16_4096_bf16", "dispatched")]  # 16 rows take the fast route under the interpreter
    if b16.route != "fallback":
        assert b16.status == "not measured" and pd.isna(b16.median_us)
    assert set(host_table(classify(rows)).index) == {r.case_id for r in rows.itertuples()}


def test_bench_op_family_host_prints_and_writes_the_host_rows(tmp_path, capsys, monkeypatch):
    """``bench --op fused_add_rms_norm --family host --out DIR``: no matrix case runs; the host table compares each
    form with its own baseline (the public function with the spec's first, the in-place form with its composite),
    and the rows land in the folder's results.csv."""
    import pandas as pd

    from fastpath_lib.bench import cli, ophost

    real = ophost.measure_host_op
    monkeypatch.setattr(ophost, "measure_host_op", lambda spec, quick=False: real(spec, quick=quick, rounds=1))
    assert cli.bench_main(["--op", "fused_add_rms_norm", "--quick", "--family", "host", "--out",
                           str(tmp_path / "h")]) == 0
    text = capsys.readouterr().out
    table = text[text.index("host time per call"):]
    line = next(ln for ln in table.splitlines() if ln.startswith("host_decode_m1_4096_bf16_inplace "))
    assert "inplace composite" in line and "unfused_eager" in table and "not a GPU measurement".upper() in text
    vllm = text[text.index("vLLM's dispatch per call"):]  # vLLM's rows, run or skipped with the reason
    assert "CPU host time" in vllm and "vllm_fused_add_rms_norm_reject" in vllm
    df = pd.read_csv(tmp_path / "h" / "results.csv")
    assert set(df.family) == {"host-overhead"} and "host_decode_m1_4096_bf16_inplace" in set(df.case_id)
    assert {"vllm_fused_add_rms_norm_reject", "vllm_fused_add_rms_norm_accept"} <= set(df.case_id)
