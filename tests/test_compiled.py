"""The kernels compiled for real GPUs (sm_80, sm_90) on this machine: they compile, no eligible one spills, the forward
uses vector accesses where the launch is aligned, and a misaligned launch does not (the alignment condition's evidence).

Compile-time facts from Triton's ahead-of-time compiler and ptxas; nothing here runs on or measures a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fastpath_lib.rmsnorm import compiled, launch
from fastpath_lib.rmsnorm.predicate import BASE_CASE, MAX_COLS, PREDICATE, Limits

pytestmark = pytest.mark.skipif(compiled.missing_tools() is not None,
                                reason=f"cannot compile for a GPU target: {compiled.missing_tools()}")

ALIGNED = compiled.specializations()
MISALIGNED = compiled.specializations(kernels=("forward",), aligned=(False,), weights=("same",))
#: widths below 16 columns: Triton only specializes on integers divisible by 16, so their column mask is not known to
#: be uniform over a vector and stays scalar (a declared limit, asserted below so that a change shows)
NARROW = 16


@pytest.fixture(scope="module")
def aligned_facts():
    return compiled.facts(ALIGNED)


@pytest.fixture(scope="module")
def misaligned_facts():
    return compiled.facts(MISALIGNED)


def _by(rows, **match):
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def test_every_specialization_compiles_for_sm80_and_sm90(aligned_facts):
    """One row per specialization, both kernels, every block size the launch rule picks, both architectures."""
    assert len(aligned_facts) == len(ALIGNED)
    blocks = {launch.launch_settings(n)[0] for n in range(1, MAX_COLS + 1)}
    for kernel in launch.KERNELS:
        for arch in ("sm_80", "sm_90"):
            got = {r["block"] for r in _by(aligned_facts, kernel=kernel, arch=arch)}
            assert got == blocks, (kernel, arch, sorted(blocks - got))
    assert all(r["registers"] > 0 and r["load_ops"] > 0 and r["store_ops"] > 0 for r in aligned_facts)


def test_list_follows_the_launch_rule():
    """Each specialization's block, warps and forward rows are what the launchers pick for its width."""
    for spec in ALIGNED:
        block, warps = launch.launch_settings(spec.block, spec.kernel)
        assert (spec.block, spec.warps) == (block, warps)
        if spec.kernel == "forward":
            assert spec.rows_per_program == launch.forward_rows_per_program(spec.block)
        else:
            assert spec.rows_per_program in compiled.BACKWARD_ROW_BLOCKS


def _widths_in_use() -> set[int]:
    """Row widths of the benchmark matrix (full and quick shapes) and of the predicate's boundary points."""
    widths = {BASE_CASE["cols"]}
    data = json.loads((Path(__file__).parents[1] / "fastpath_lib" / "bench" / "cases.json").read_text())
    for case in data["cases"]:
        widths.add(case["shape"][-1])
        widths.add(case.get("quick", {}).get("shape", case["shape"])[-1])
    for cond in PREDICATE.conditions:
        for b in cond.boundaries:
            change = b.overrides(Limits())
            if "cols" in change:
                widths.add(change["cols"])
    return {w for w in widths if 1 <= w <= MAX_COLS}


def test_widths_of_the_matrix_and_boundaries_are_covered():
    """Every eligible width the matrix and the boundary points launch maps to a compiled specialization."""
    compiled_keys = {(s.kernel, s.dtype, s.block, s.warps) for s in ALIGNED}
    widths = _widths_in_use()
    assert {128, 4096, 16384} <= widths  # the matrix is read, not an empty set
    for w in widths:
        for kernel in launch.KERNELS:
            block, warps = launch.launch_settings(w, kernel)
            for dtype in compiled.DTYPES:
                assert (kernel, dtype, block, warps) in compiled_keys, (w, kernel, dtype)


def test_no_eligible_specialization_spills(aligned_facts):
    spilling = [(r["kernel"], r["arch"], r["dtype"], r["weight"], r["block"], r["warps"], r["rows_per_program"],
                 r["registers"], r["spills"]) for r in aligned_facts if r["spills"] or r["stack"]]
    assert not spilling, f"spills to local memory (kernel, arch, dtype, weight, block, warps, rows, regs, bytes): " \
                         f"{spilling}"


def test_forward_row_accesses_are_vectorized_when_aligned(aligned_facts):
    """16-byte loads and stores at every aligned width from 16 columns on (the whole row when it is narrower)."""
    short = []
    for spec, r in zip(ALIGNED, aligned_facts):
        if spec.kernel != "forward" or spec.block < NARROW:
            continue
        want = compiled.vector_bytes_expected(spec)
        assert want == 16
        if r["load_bytes"] < want or r["store_bytes"] < want:
            short.append((spec.label(), r["load_bytes"], r["store_bytes"]))
    assert not short, f"scalar or narrow vector accesses (label, load bytes, store bytes): {short}"


def test_forward_narrow_rows_stay_scalar_declared_limit(aligned_facts):
    """Below 16 columns the column mask blocks vectors: the declared limit, so an improvement shows up here."""
    rows = [(s, r) for s, r in zip(ALIGNED, aligned_facts) if s.kernel == "forward" and s.block < NARROW]
    assert rows
    for spec, r in rows:
        elem = 4 if spec.dtype == "float32" else 2
        assert r["load_bytes_max"] == elem and r["store_bytes_max"] == elem, spec.label()


def test_backward_row_accesses_are_vectorized_from_1024_columns(aligned_facts):
    """The backward holds one row per program: 16-byte accesses once each thread has 8 or more elements."""
    for spec, r in zip(ALIGNED, aligned_facts):
        if spec.kernel == "backward" and spec.block >= 1024:
            assert r["load_bytes"] == 16 and r["store_bytes"] == 16, spec.label()


def test_misaligned_forward_is_scalar(misaligned_facts, aligned_facts):
    """Without the 16-byte divisibility Triton derives from aligned pointers and strides, every access is scalar."""
    aligned = {(r["arch"], r["dtype"], r["block"]): r for r in aligned_facts if r["kernel"] == "forward"
               and r["weight"] != "none"}
    for r in misaligned_facts:
        elem = 4 if r["dtype"] == "float32" else 2
        assert r["load_bytes_max"] == elem and r["store_bytes_max"] == elem, r
        if r["block"] >= NARROW:
            assert aligned[(r["arch"], r["dtype"], r["block"])]["load_bytes"] == 16


def test_register_counts_describe_tritons_own_binary(aligned_facts):
    """Facts come from Triton's own ptxas log, or a rerun whose register count matches Triton's cubin."""
    for r in aligned_facts:
        assert r["ptxas_log"] in ("triton", "rerun")
        if r["ptxas_log"] == "rerun" and r["cubin_registers"] is not None:
            assert r["cubin_registers"] == r["registers"], r


def test_access_width_parser():
    ptx = """
    @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
    @%p2 ld.global.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd2 + 0 ];
    @%p3 ld.global.b16 { %rs1 }, [ %rd3 + 0 ];
    @%p4 st.global.v4.b32 [ %rd4 + 0 ], { %r1, %r2, %r3, %r4 };
    ld.shared.v4.b32 { %r7, %r8, %r9, %r10 }, [ %r11 ];
    """
    got = compiled._access_bytes(ptx)
    assert (got["load_bytes"], got["load_bytes_max"], got["load_ops"]) == (2, 16, 3)
    assert (got["store_bytes"], got["store_bytes_max"], got["store_ops"]) == (16, 16, 1)


def test_facts_table_and_markdown(aligned_facts):
    rows = compiled.facts(ALIGNED[:3])
    table = compiled.facts_table(rows)
    assert list(table.columns)[:4] == ["kernel", "arch", "dtype", "weight"]
    assert len(table) == 3 and table["registers"].tolist() == [r["registers"] for r in rows]
    md = compiled.facts_markdown(rows)
    assert "not GPU measurements" in md and md.count("\n| forward") + md.count("\n| backward") == 3


def test_a_specialization_that_does_not_compile_fails_naming_it():
    """A compile error is an error here, naming the specialization: what makes CI fail on a kernel that only the
    interpreter (which compiles nothing) accepts."""
    spec = compiled.Specialization("forward", "float16", "float16", 128, 4, 3, True, 90)  # rows not a power of two
    with pytest.raises(RuntimeError, match="forward fp16 w=fp16 block=128 warps=4 rows=3"):
        compiled.facts([spec])
