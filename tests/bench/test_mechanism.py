"""Counted traffic beside the bytes model (fastpath_lib.bench.mechanism): the columns, the explanations, the table,
and both ops' quick matrices counted: every count equals its model or is explained (the backward's scratch)."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import torch

import fastpath_lib
from fastpath_lib import opspec, runtime
from fastpath_lib.bench import mechanism
from fastpath_lib.bench.matrix import load_cases
from fastpath_lib.bench.schema import CSV_COLUMNS, empty_row
from fastpath_lib.bench.timing import bytes_moved
from fastpath_lib.cases import CaseSpec

interpreter = pytest.mark.skipif(not runtime.interpreter_enabled(), reason="counts under Triton's interpreter only")
FUSED = opspec.get("fused_add_rms_norm")


def _row(case_id="c", provider="dispatched", pass_="forward", rows=16, cols=512, dtype="bfloat16", model=None,
         counted=None, scratch=0, requested=None, oob=0, launches=1.0):
    return empty_row(case_id=case_id, provider=provider, rows=rows, cols=cols, dtype=dtype, bytes_moved=model,
                     counted_bytes=counted, scratch_bytes=scratch, requested_bytes=requested, oob_accesses=oob,
                     launches_per_call=launches, **{"pass": pass_})


def test_explain_accepts_equal_counts_and_the_backward_scratch_and_nothing_else():
    assert mechanism.explain(_row(model=33792, counted=33792)) == (True, "= model")
    ok, why = mechanism.explain(_row(pass_="backward", model=84992, counted=92160, scratch=8192))
    assert ok and "partial-dw scratch (8,192 bytes" in why and "(1,024)" in why
    assert mechanism.explain(_row(pass_="backward", model=84992, counted=92160 + 2, scratch=8192))[0] is False
    assert mechanism.explain(_row(pass_="forward", model=84992, counted=92160, scratch=8192))[0] is False
    assert mechanism.explain(_row(model=100, counted=102)) == (
        False, "the bytes model says 100, the interpreter counted 102 (+2 bytes the kit cannot explain)")
    assert mechanism.explain(_row(model=100)) == (True, "not counted")


def test_unexplained_lists_a_wrong_count_and_an_out_of_bounds_access():
    df = pd.DataFrame([_row("a", model=10, counted=10), _row("b", model=10, counted=12), _row("c", model=10),
                       _row("d", model=10, counted=10, oob=1)], columns=CSV_COLUMNS)
    assert list(mechanism.unexplained(df).case_id) == ["b", "d"]


def test_the_table_puts_model_and_count_side_by_side_with_the_unfused_model_beside_a_fusion():
    es, act, w = 2, 8 * 128 * 2, 128 * 2
    rows = [_row("f", "baseline", rows=8, cols=128, dtype="float16", model=5 * act + w),
            _row("f", "dispatched", rows=8, cols=128, dtype="float16", model=4 * act + w, counted=4 * act + w,
                 requested=4 * act + 8 * w),
            _row("fb", "dispatched", rows=8, cols=128, dtype="float16", model=4 * act + w)]  # fallback: not counted
    lines = mechanism.traffic_section(pd.DataFrame(rows, columns=CSV_COLUMNS), baseline="unfused_eager",
                                      vectors=["weight"], rereads=["the weight is re-read by every program"])
    text = "\n".join(lines)
    assert "plus w, a vector one row wide (`weight`)" in lines[0]
    assert "the weight is re-read by every program: logical traffic, served by cache on a GPU" in text
    assert "reads each row twice" not in "\n".join(mechanism.traffic_section(  # no backward row counted here
        pd.DataFrame(rows, columns=CSV_COLUMNS), backward_rereads=["the backward reads each row twice"]))
    plain = "\n".join(mechanism.traffic_section(pd.DataFrame(rows, columns=CSV_COLUMNS)))  # the op declares neither
    assert "served by cache" not in plain and "a vector one row wide, counted once per launch" in plain
    assert "counted by the Triton interpreter" in lines[0] and "unfused_eager model" in lines[2]
    (row,) = [line for line in lines if line.startswith("| f |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4:] == [f"{4 * act + w:,}", f"{5 * act + w:,}", "5 + w", f"{4 * act + w:,}", "4 + w",
                         f"{4 * act + 8 * w:,}", f"{(4 * act + 8 * w) / (4 * act + w):.2f}", "0", "= model"], cells
    assert "| fb |" not in text and "served by cache on a GPU" in text and es == 2
    no_count = pd.DataFrame([_row("g", model=10)], columns=CSV_COLUMNS)
    assert mechanism.traffic_section(no_count) == []  # a GPU run: nothing counted, no table


def test_the_table_names_the_backward_scratch_and_bolds_what_it_cannot_explain():
    rows = [_row("bwd", pass_="backward", model=84992, counted=92160, scratch=8192, requested=172032, launches=2.0),
            _row("odd", model=100, counted=102, requested=102)]
    text = "\n".join(mechanism.traffic_section(pd.DataFrame(rows, columns=CSV_COLUMNS),
                                                backward_rereads=["the backward reads each row twice"]))
    assert "| bwd | backward | 16x512 | 2 | 84,992 | 92,160 | 5 + 2 w | 172,032 | 1.87 | 0 |" in text
    assert "the backward reads each row twice: logical traffic" in text
    assert ("The backward's count (bwd) includes the kernel's fp32 partial-dw scratch in place of the dw the model "
            "writes") in text
    assert "**the bytes model says 100, the interpreter counted 102 (+2 bytes the kit cannot explain)**" in text


def test_a_table_whose_counts_read_as_no_whole_passes_has_no_passes_column():
    """prac13 F6: an op with outputs of another dtype than its input (int8 values and fp32 scales) moves bytes that are
    no whole number of passes over its rows; the column read "—" on every row under a caption that promised passes."""
    rows = [_row("q", model=1000, counted=1000, requested=1000), _row("r", model=1001, counted=1001, requested=1001)]
    lines = mechanism.traffic_section(pd.DataFrame(rows, columns=CSV_COLUMNS))
    assert "passes" not in lines[0] and "passes" not in lines[2], lines[:3]
    assert lines[4] == "| q | forward | 16x512 | 1 | 1,000 | 1,000 | 1,000 | 1.00 | 0 | = model |", lines[4]


def test_an_op_with_no_vector_reads_as_passes_alone_never_with_a_weight():
    """prac14 F6: a weightless op whose output is half its input (silu_and_mul: kernel 1.5 passes, eager 2.5) read
    as ``1 + 2 w`` / ``2 + 2 w`` under a caption naming "w, a vector one row wide". The passes come from the op's own
    arguments: the kit's test ops unlike RMSNorm, absmax (no vector) and bias_square (a bias one row wide)."""
    from tests import absmax_op, bias_square_op

    assert mechanism.vector_arguments(absmax_op.SPEC) == []
    assert mechanism.vector_arguments(bias_square_op.SPEC) == ["bias"]
    act = 4 * 256 * 2
    rows = [_row("half", "baseline", rows=4, cols=256, dtype="float16", model=5 * act // 2),
            _row("half", rows=4, cols=256, dtype="float16", model=3 * act // 2, counted=3 * act // 2,
                 requested=3 * act // 2)]
    df = pd.DataFrame(rows, columns=CSV_COLUMNS)
    lines = mechanism.traffic_section(df, vectors=mechanism.vector_arguments(absmax_op.SPEC))
    text = "\n".join(lines)
    assert not re.search(r"\bw\b|weight|one row wide", text), text
    assert "passes over rows x cols, the case's input" in lines[0], lines[0]
    (row,) = [line for line in lines if line.startswith("| half |")]
    assert [c.strip() for c in row.strip("|").split("|")][4:8] == ["3,072", "5,120", "2.5", "3,072"], row
    assert "| 1.5 |" in row
    assert "2 + 2 w" in "\n".join(mechanism.traffic_section(df, vectors=["bias"]))  # an op with a vector keeps it


def test_count_call_is_empty_off_the_interpreter_and_for_calls_without_triton(monkeypatch):
    assert mechanism.count_call(lambda: torch.ones(3) + 1) == {} or not runtime.interpreter_enabled()
    monkeypatch.setattr(runtime, "interpreter_enabled", lambda: False)
    assert mechanism.count_call(lambda: pytest.fail("not called off the interpreter")) == {}


@interpreter
def test_count_call_counts_the_backward_with_its_scratch_at_16x512_bf16():
    """The issue's measurement: 92,160 bytes counted against a model of 84,992 (fp32 partial dw, 4 programs)."""
    x = torch.randn(16, 512, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(512, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(16, 512, dtype=torch.bfloat16)
    got = mechanism.count_call(lambda: torch.autograd.grad(fastpath_lib.rms_norm(x, (512,), w), (x, w), dy))
    assert (got["counted_bytes"], got["scratch_bytes"], got["oob_accesses"], got["launches_per_call"]) == (
        92160, 4 * 512 * 4, 0, 2.0)
    assert bytes_moved(16, 512, torch.bfloat16, "backward") == 84992
    assert got["requested_bytes"] > got["counted_bytes"] and "counted by the Triton interpreter" in got["launches_note"]


@interpreter
def test_fp32_backward_at_16384_columns_counts_one_scratch_row_per_row_and_agrees_with_the_model():
    """The launcher gives fp32 rows of 16384 columns one row per backward program (launch.backward_max_rows; with
    more, the compiled kernel spills): 10 rows, 10 fp32 partial-dw rows, where bf16 rows of the same width share at most
    the interpreter's 4 programs. Either count is its model plus the scratch less the dw the model writes."""
    got = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(10, 16384, dtype=dtype, requires_grad=True)
        w = torch.randn(16384, dtype=dtype, requires_grad=True)
        dy = torch.randn(10, 16384, dtype=dtype)
        assert fastpath_lib.explain(x, (16384,), w).route == "triton"
        row = _row(pass_="backward", rows=10, cols=16384, dtype=str(dtype)[6:],
                   model=bytes_moved(10, 16384, dtype, "backward"))
        got[dtype] = row | mechanism.count_call(
            lambda x=x, w=w, dy=dy: torch.autograd.grad(fastpath_lib.rms_norm(x, (16384,), w), (x, w), dy))
        assert mechanism.explain(got[dtype])[0] and got[dtype]["oob_accesses"] == 0, mechanism.explain(got[dtype])
    assert got[torch.float32]["scratch_bytes"] == 10 * 16384 * 4
    assert got[torch.bfloat16]["scratch_bytes"] == 3 * 16384 * 4  # 10 rows in blocks of 4: 3 programs


def _rms_rows():
    rows = []
    for case in load_cases():
        r, c, _ = case.dims(True)
        x, ns, w = case.spec(True).build(seed=1, device="cpu").args()
        if fastpath_lib.explain(x, ns, w).route != "triton":
            continue
        if case.pass_ == "backward":
            x, w = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
            dy = torch.randn(tuple(x.shape), dtype=x.dtype)

            def call(x=x, ns=ns, w=w, dy=dy):
                return torch.autograd.grad(fastpath_lib.rms_norm(x, ns, w), (x, w), dy)
        else:
            def call(x=x, ns=ns, w=w):
                return fastpath_lib.rms_norm(x, ns, w)
        rows.append(_row(case.id, pass_=case.pass_, rows=r, cols=c, dtype=case.dtype,
                         model=bytes_moved(r, c, case.torch_dtype, case.pass_)) | mechanism.count_call(call))
    return rows


def _fused_rows():
    rows = []
    for case in FUSED.matrix():
        r, c = case.dims(True)
        dtype = getattr(torch, case.dtype)
        args = FUSED.args((FUSED.case_spec or CaseSpec)(rows=r, cols=c, dtype=dtype, device="cpu").build(seed=1))
        if FUSED.route(*args) != "triton":
            continue
        rows.append(_row(case.id, rows=r, cols=c, dtype=case.dtype, model=FUSED.bytes_for("dispatched", r, c, dtype))
                    | mechanism.count_call(lambda args=args: FUSED.function(*args)))
    return rows


@interpreter
def test_both_quick_matrices_count_what_their_models_say_or_the_kit_explains_why():
    """Every quick-matrix case on the Triton route, both ops, forward and backward: counted once, no out-of-bounds
    lane, and a count equal to the model or explained; the fused kernel at 4 passes plus the weight."""
    rms, fused = _rms_rows(), _fused_rows()
    df = pd.DataFrame(rms + fused, columns=CSV_COLUMNS)
    assert len(rms) >= 8 and len(fused) >= 6 and df.counted_bytes.notna().all()
    bad = mechanism.unexplained(df)
    assert bad.empty, bad[["case_id", "bytes_moved", "counted_bytes", "scratch_bytes", "oob_accesses"]]
    assert {r["pass"] for r in rms} == {"forward", "backward"}
    assert all(r["counted_bytes"] == r["bytes_moved"] for r in rms if r["pass"] == "forward")
    assert all(r["counted_bytes"] > r["bytes_moved"] and r["launches_per_call"] == 2 for r in rms
               if r["pass"] == "backward")
    for r in fused:
        es = torch.empty((), dtype=getattr(torch, r["dtype"])).element_size()
        assert r["counted_bytes"] == 4 * r["rows"] * r["cols"] * es + r["cols"] * es, r["case_id"]
        assert r["launches_per_call"] == 1
