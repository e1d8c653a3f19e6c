"""The kernels compiled for real GPUs on this machine: every RMSNorm specialization for sm_80 and sm_90, and both ops'
kernels at a wide and a mid width for every target (sm_75, sm_80, sm_86, sm_89, sm_90, sm_120). They compile, no
eligible one spills on any target, the forward loads and stores 16 bytes at a time at every eligible width, and a
misaligned launch does not (the alignment condition's evidence). What is compared is code, never the source paths the
PTX names.

Compile-time facts from Triton's ahead-of-time compiler and ptxas; nothing here runs on or measures a GPU.

The facts of every binary these tests read are recorded in ``tests/data/compiled_facts.json`` under a key: the Triton
and ptxas versions, Triton's own cache key of each kernel compiled, the code that reads facts off a binary, and the
list of binaries. Where the key is this checkout's, the tests read the record and compile a fresh sample of it, which
must give the same facts; where it is not, they compile everything (minutes on a cold Triton cache) and
``test_the_record_is_of_this_code`` fails until the record is written again: ``FASTPATH_RECORD=1 python -m pytest
tests/rmsnorm/test_compiled.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fastpath_lib import boundary
from fastpath_lib.fused import launch as fused_launch
from fastpath_lib.fused import op_spec
from fastpath_lib.fused.predicate import BACKWARD_MAX_COLS
from fastpath_lib.rmsnorm import compiled, launch
from fastpath_lib.rmsnorm import predicate as P
from fastpath_lib.rmsnorm.predicate import BASE_CASE, MAX_COLS, PREDICATE, Limits

pytestmark = pytest.mark.skipif(compiled.missing_tools() is not None,
                                reason=f"cannot compile for a GPU target: {compiled.missing_tools()}")

ALIGNED = compiled.specializations()
MISALIGNED = compiled.specializations(kernels=("forward",), aligned=(False,), weights=("same",))
ROOT = Path(__file__).parents[2]
#: A wide and a mid width: each target compiles both ops' kernels there (the full RMSNorm set is sm_80/sm_90's).
MID = 4096


def _fused_rows(build, rows: int):
    """A fused backward build with another row block (the launcher picks 1, 2, 4 or more rows per program)."""
    const = tuple((k, rows if k == "ROWS_PER_PROGRAM" else v) for k, v in build.constexprs)
    return dataclasses.replace(build, constexprs=const, rows_per_program=rows, label="")


FUSED_BUILDS = [
    *op_spec.specializations([MID, MAX_COLS], archs=compiled.TARGETS, kernels=("forward",)),
    *(_fused_rows(b, r) for b in op_spec.specializations([MID, BACKWARD_MAX_COLS], archs=compiled.TARGETS,
                                                         kernels=("backward",)) for r in (1, 4)),
]
TARGET_BUILDS = [
    *compiled.specializations([MID, MAX_COLS], archs=tuple(a for a in compiled.TARGETS if a not in compiled.ARCHS),
                              weights=("same",)),
    *FUSED_BUILDS,
]


def _marked_sample():
    """A sample across kernels, dtypes, both architectures and the block range, for the integer-mark test."""
    return [s for s in ALIGNED if s.block in (16, 256, 4096, 16384) and s.weight_dtype == s.dtype
            and s.rows_per_program in (1, 4) and (s.kernel == "forward" or s.arch == 90)]


MARKED = [dataclasses.replace(s, int_div16=True) for s in _marked_sample()]
#: RMSNorm's fp32 backward at the widest block with 2 and 4 rows per program (what the launcher does not pick).
LOOPED = [dataclasses.replace(s, rows_per_program=r) for s in compiled.specializations(
    [MAX_COLS], archs=(86, 89, 120), dtypes=("float32",), kernels=("backward",), weights=("same",)) for r in (2, 4)]
#: The fused backward one step wider than its limit, at the launcher's warps on every target and at 32 on sm_80.
WIDE = op_spec.specializations([2 * BACKWARD_MAX_COLS], archs=compiled.TARGETS, dtypes=("bfloat16",),
                               kernels=("backward",))
WIDE += [dataclasses.replace(b, warps=32, label="") for b in WIDE if b.arch == 80]
#: Every binary whose facts the tests read, in the record's order.
RECORDED = list(dict.fromkeys([*ALIGNED, *MISALIGNED, *TARGET_BUILDS, *MARKED, *LOOPED, *WIDE]))
RECORD = ROOT / "tests" / "data" / "compiled_facts.json"
#: Row fields that say how this run got a fact (its cache, its clock), not what the binary is.
HOW = ("compile_s", "from_cache", "ptxas_log", "cubin_registers")
#: The code that turns a binary into facts: a change to it is a change of every fact.
_READERS = (compiled._compile_one, compiled._access_bytes, compiled._parse_ptxas_log, compiled._ptxas_rerun,
            compiled._cubin_registers, compiled._signature, compiled.code_sha256, compiled._kept)
_KEYS = """
import json, sys
import triton
out = {}
for source in json.loads(sys.stdin.read()):
    module, name = source.split(":")
    out[source] = getattr(__import__(module, fromlist=["_"]), name).cache_key
print(json.dumps(out))
"""


def _id(spec) -> str:
    return json.dumps(dataclasses.asdict(spec), sort_keys=True)


def _source(spec) -> str:
    if getattr(spec, "source", None):
        return spec.source
    return "fastpath_lib.rmsnorm.kernels:" + ("rms_norm_fwd_kernel" if spec.kernel == "forward" else
                                                "rms_norm_bwd_kernel")


@functools.cache
def _key() -> dict:
    """What the recorded facts follow from, read from this checkout and this Triton."""
    import triton

    sources = sorted({_source(s) for s in RECORDED})
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # Triton's key is a compiled function's
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", _KEYS], input=json.dumps(sources), env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ptxas = subprocess.run([compiled.tool_path("ptxas"), "--version"], capture_output=True, text=True, timeout=60)
    readers = hashlib.sha256("".join(inspect.getsource(f) for f in _READERS).encode()).hexdigest()
    binaries = hashlib.sha256("\n".join(_id(s) for s in RECORDED).encode()).hexdigest()
    return {"triton": triton.__version__, "ptxas": ptxas.stdout.strip().splitlines()[-1],
            "kernels": json.loads(proc.stdout), "readers": readers, "binaries": binaries}


@functools.cache
def _record() -> dict | None:
    """The recorded rows by binary, or ``None`` when the record is missing, of another key, or being written."""
    if os.environ.get("FASTPATH_RECORD") or not RECORD.exists():
        return None
    data = json.loads(RECORD.read_text())
    if data["key"] != _key():
        return None
    return {_id(s): dict(zip(data["columns"], row)) for s, row in zip(RECORDED, data["rows"])}


def _facts(specs) -> list[dict]:
    """The facts of ``specs``: recorded, or compiled here when the record is not of this code."""
    rows = _record()
    if rows is not None and all(_id(s) in rows for s in specs):
        return [dict(rows[_id(s)]) for s in specs]
    return compiled.facts(specs)


@pytest.fixture(scope="module", autouse=True)
def _write_record():
    """``FASTPATH_RECORD=1``: compile every recorded binary and write the record (after the module's tests)."""
    yield
    if os.environ.get("FASTPATH_RECORD"):
        rows = compiled.facts(RECORDED)
        RECORD.parent.mkdir(exist_ok=True)
        columns = sorted(k for k in rows[0] if k not in ("compile_s", "from_cache"))  # this run's clock and cache
        lines = ",\n".join(json.dumps([r[c] for c in columns]) for r in rows)
        RECORD.write_text(f'{{"key": {json.dumps(_key(), indent=1, sort_keys=True)},\n"columns": '
                          f'{json.dumps(columns)},\n"rows": [\n{lines}\n]}}\n')


@pytest.fixture(scope="module")
def aligned_facts():
    return _facts(ALIGNED)


@pytest.fixture(scope="module")
def target_facts():
    return _facts(TARGET_BUILDS)


@pytest.fixture(scope="module")
def misaligned_facts():
    return _facts(MISALIGNED)


def test_the_record_is_of_this_code():
    """The record's key is this checkout's (under the Triton CI installs; under another the facts were compiled here,
    and the record is not read)."""
    import triton

    if os.environ.get("FASTPATH_RECORD"):
        pytest.skip("writing the record")
    assert RECORD.exists(), ("no tests/data/compiled_facts.json: write it with FASTPATH_RECORD=1 python -m pytest "
                             "tests/rmsnorm/test_compiled.py")
    data = json.loads(RECORD.read_text())
    if data["key"]["triton"] != triton.__version__:
        pytest.skip(f"the record is of Triton {data['key']['triton']}; this is {triton.__version__}: the tests "
                    "compiled every binary here")
    differ = sorted(k for k in _key() if _key()[k] != data["key"].get(k))
    assert not differ, (f"tests/data/compiled_facts.json is not of this code ({', '.join(differ)} differ): write it "
                        "again with FASTPATH_RECORD=1 python -m pytest tests/rmsnorm/test_compiled.py")


def test_a_fresh_sample_compiles_to_the_recorded_facts():
    """Twelve recorded binaries, one from each of twelve (kernel, dtype, target) classes drawn at random, compiled
    now: every fact is the recorded one. The seed is in the failure message (``FASTPATH_SAMPLE_SEED`` replays it)."""
    rows = _record()
    if rows is None:
        pytest.skip("the record is not of this code (see test_the_record_is_of_this_code): every fact was compiled")
    seed = int(os.environ.get("FASTPATH_SAMPLE_SEED") or random.SystemRandom().randrange(2**32))
    rng = random.Random(seed)
    classes: dict[tuple, list] = {}
    for spec in RECORDED:
        classes.setdefault((spec.kernel, spec.dtype, spec.arch), []).append(spec)
    picked = [rng.choice(classes[c]) for c in rng.sample(sorted(classes), 12)]
    compiled._cache.clear()
    fresh = compiled.facts(picked)
    differ = [(s.label() if callable(s.label) else s.label,
               {k: (rows[_id(s)][k], f[k]) for k in f if k not in HOW and rows[_id(s)].get(k) != f[k]})
              for s, f in zip(picked, fresh)]
    differ = [d for d in differ if d[1]]
    assert not differ, f"seed {seed}: (binary, {{fact: (recorded, compiled now)}}): {differ}"


def _by(rows, **match):
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


@functools.cache
def _eligible_widths(dtype: str) -> tuple[int, ...]:
    """Every row width the predicate admits for ``dtype``: its width conditions (at most MAX_COLS columns; row width
    and stride whole 16-byte vectors) asked of a contiguous two-row input, width by width."""
    conditions = [PREDICATE["cols"], PREDICATE["row_stride_alignment"]]
    dt = getattr(torch, dtype)
    return tuple(n for n in range(1, MAX_COLS + 2)
                 if all(c.check(P.make_call(torch.empty(2, n, dtype=dt), [n])) is None for c in conditions))


def _forward_key(n_cols: int, dtype: str, weight, arch: int) -> compiled.Specialization:
    """The aligned forward specialization an eligible launch of width ``n_cols`` runs, from the launch rule."""
    block, warps = launch.launch_settings(n_cols, "forward")
    return compiled.Specialization("forward", dtype, weight, block, warps, launch.forward_rows_per_program(n_cols),
                                   True, arch)


def test_eligible_widths_come_from_the_predicate():
    """The widths the tests below walk through: the predicate's, read from it (whole 16-byte rows, <= MAX_COLS)."""
    for dtype in compiled.DTYPES:
        widths = _eligible_widths(dtype)
        elem = torch.empty((), dtype=getattr(torch, dtype)).element_size()
        assert widths[0] == P.ALIGN_BYTES // elem and widths[-1] == MAX_COLS
        assert len(widths) == MAX_COLS * elem // P.ALIGN_BYTES
    assert 100 in _eligible_widths("float32") and 24 in _eligible_widths("float16")
    assert 8 in _eligible_widths("bfloat16")
    # most of them are not multiples of 16 elements, which is all Triton itself would mark on an integer
    assert all(sum(n % 16 for n in _eligible_widths(d)) for d in compiled.DTYPES)


def test_every_specialization_compiles_for_sm80_and_sm90(aligned_facts):
    """One row per specialization, both kernels, every block size the launch rule picks for an eligible width of each
    dtype, both architectures."""
    assert len(aligned_facts) == len(ALIGNED)
    for dtype in compiled.DTYPES:
        for kernel in launch.KERNELS:
            blocks = {launch.launch_settings(n, kernel)[0] for n in _eligible_widths(dtype)}
            for arch in ("sm_80", "sm_90"):
                got = {r["block"] for r in _by(aligned_facts, kernel=kernel, arch=arch, dtype=dtype)}
                assert got == blocks, (kernel, dtype, arch, sorted(blocks ^ got))
    assert all(r["registers"] > 0 and r["load_ops"] > 0 and r["store_ops"] > 0 for r in aligned_facts)
    assert all(r["vec"] == s.vec > 1 for s, r in zip(ALIGNED, aligned_facts))


def test_list_follows_the_launch_rule():
    """Each specialization's block, warps and forward rows are what the launchers pick for its width."""
    for spec in ALIGNED:
        block, warps = launch.launch_settings(spec.block, spec.kernel)
        assert (spec.block, spec.warps) == (block, warps)
        if spec.kernel == "forward":
            assert spec.rows_per_program == launch.forward_rows_per_program(spec.block)
        else:
            limit = launch.backward_max_rows(spec.block, {"float32": 4}.get(spec.dtype, 2))
            assert spec.rows_per_program in compiled.BACKWARD_ROW_BLOCKS
            assert limit is None or spec.rows_per_program <= limit, spec.label()
    # the backward's row blocks: 1, 2 and 4 rows everywhere but fp32 at the widest block, which launches 1 row only
    bwd = {(s.dtype, s.block, s.rows_per_program) for s in ALIGNED if s.kernel == "backward"}
    assert {r for d, b, r in bwd if (d, b) == ("float32", MAX_COLS)} == {1}
    assert {r for d, b, r in bwd if (d, b) == ("bfloat16", MAX_COLS)} == set(compiled.BACKWARD_ROW_BLOCKS)


def _widths_in_use() -> set[int]:
    """Row widths of the benchmark matrix (full and quick shapes) and of the predicate's boundary points."""
    widths = {BASE_CASE["cols"]}
    data = json.loads((Path(__file__).parents[2] / "fastpath_lib" / "bench" / "cases.json").read_text())
    for case in data["cases"]:
        widths.add(case["shape"][-1])
        widths.add(case.get("quick", {}).get("shape", case["shape"])[-1])
    for cond in PREDICATE.conditions:
        for b in cond.boundaries:
            change = boundary.overrides(b, Limits())
            if "cols" in change:
                widths.add(change["cols"])
    return {w for w in widths if 1 <= w <= MAX_COLS}


def test_widths_of_the_matrix_and_boundaries_are_covered():
    """Every eligible width the matrix and the boundary points launch maps to a compiled specialization."""
    compiled_keys = {(s.kernel, s.dtype, s.block, s.warps) for s in ALIGNED}
    widths = _widths_in_use()
    assert {8, 24, 128, 4096, 16384} <= widths  # the matrix and the boundary points are read, not an empty set
    for w in widths:
        for kernel in launch.KERNELS:
            block, warps = launch.launch_settings(w, kernel)
            for dtype in compiled.DTYPES:
                if w in _eligible_widths(dtype):
                    assert (kernel, dtype, block, warps) in compiled_keys, (w, kernel, dtype)


def _pinned_triton() -> str | None:
    """The Triton version CI installs (constraints.txt), or None when the file or the pin is missing."""
    path = ROOT / "constraints.txt"
    m = re.search(r"^triton==([\w.]+)", path.read_text(), re.MULTILINE) if path.exists() else None
    return m.group(1) if m else None


def _older_than(version: str, pinned: str) -> bool:
    def key(v):
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    return key(version) < key(pinned)


def test_no_eligible_specialization_spills(aligned_facts, request):
    """Strict on the Triton CI installs (and newer). An older Triton (the GPU machine's 3.6, ptxas 12.8) still spills a
    few bytes in a few wide specializations, where ptxas trades registers for occupancy: an expected failure there,
    with what it measured in the reason, never a silent skip."""
    _assert_no_spills(aligned_facts, request)


def test_both_ops_compile_for_every_target_without_spills(aligned_facts, target_facts, request):
    """Both ops' kernels, forward and backward, compile for every target (``compiled.TARGETS``) at the widest eligible
    width and a mid one (the fused backward's widest is BACKWARD_MAX_COLS), spill-free, the forwards with 16-byte
    accesses."""
    for b in TARGET_BUILDS[len(TARGET_BUILDS) - len(FUSED_BUILDS):]:  # the fused launcher's own rule
        assert (b.block, b.warps) == fused_launch.launch_settings(b.block, b.kernel.split("_")[1]), b.label
    rows = target_facts + [r for r in aligned_facts if r["block"] in (MID, MAX_COLS) and r["weight"] != "none"]
    kernels = ("forward", "backward", "fused_forward", "fused_backward")
    assert {(r["kernel"], r["arch"]) for r in rows} == {(k, f"sm_{a}") for k in kernels for a in compiled.TARGETS}
    assert {(r["kernel"], r["block"]) for r in rows} == {(k, b) for k in kernels for b in (
        (MID, BACKWARD_MAX_COLS) if k == "fused_backward" else (MID, MAX_COLS))}
    narrow = [(r["kernel"], r["arch"], r["dtype"], r["block"]) for r in rows
              if r["kernel"].endswith("forward") and (r["load_bytes"], r["store_bytes"]) != (16, 16)]
    assert not narrow, f"forwards with narrower than 16-byte accesses: {narrow}"
    _assert_no_spills(rows, request)


def test_fp32_backward_at_16384_columns_spills_with_more_than_one_row():
    """Why the launcher gives RMSNorm's fp32 backward one row per program at 16384 columns (backward_max_rows): with 2
    or 4 rows the loop carries dw, and the compiled kernel spills on sm_86, sm_89 and sm_120 (Triton 3.8). When a
    Triton release stops that on every target, this fails: lift the limit (the scratch is one fp32 row per row)."""
    assert launch.backward_max_rows(MAX_COLS, 4) == 1 and launch.backward_max_rows(MAX_COLS, 2) is None
    assert {s.rows_per_program for s in compiled.specializations([MAX_COLS], archs=(86,), dtypes=("float32",),
                                                                 kernels=("backward",))} == {1}
    rows = _facts(LOOPED)
    spilling = {(r["arch"], r["rows_per_program"], r["spills"]) for r in rows if r["spills"]}
    assert {a for a, _, _ in spilling} == {"sm_86", "sm_89", "sm_120"}, f"(arch, rows, bytes): {sorted(spilling)}"


def test_fused_backward_spills_above_its_width_limit():
    """Why BACKWARD_MAX_COLS is the fused predicate's limit: one step wider the backward spills on every target at
    the launcher's 16 warps, and at 32 (the most a program has; sm_80 here, every target when measured). When a
    Triton release stops that, this fails: raise the limit."""
    rows = _facts(WIDE)
    assert {(r["warps"], r["arch"]) for r in rows} == {(16, f"sm_{a}") for a in compiled.TARGETS} | {(32, "sm_80")}
    assert all(r["spills"] > 0 for r in rows), [(r["arch"], r["warps"], r["spills"]) for r in rows]


def _older_than_ci() -> bool:
    import triton

    pinned = _pinned_triton()
    return bool(pinned) and _older_than(triton.__version__, pinned)


def _assert_no_spills(rows, request):
    import triton

    spilling = [(r["kernel"], r["arch"], r["dtype"], r["weight"], r["block"], r["warps"], r["rows_per_program"],
                 r["registers"], r["spills"]) for r in rows if r["spills"] or r["stack"]]
    pinned = _pinned_triton()
    if spilling and pinned and _older_than(triton.__version__, pinned):
        request.applymarker(pytest.mark.xfail(
            strict=False, reason=f"Triton {triton.__version__} (older than CI's {pinned}) spills in "
                                 f"{len(spilling)} eligible specializations (kernel, arch, dtype, weight, block, "
                                 f"warps, rows, registers, spill bytes): {spilling}"))
    assert not spilling, f"spills to local memory with Triton {triton.__version__} (kernel, arch, dtype, weight, " \
                         f"block, warps, rows, regs, bytes): {spilling}"


def test_forward_row_accesses_are_16_bytes_at_every_eligible_width(aligned_facts):
    """Every width the predicate admits, for each dtype, with and without a weight, on both architectures, launches a
    forward whose narrowest global load and store move 16 bytes: widths that are multiples of 16 elements and those
    that are not (fp32 100, fp16 24, any row narrower than 16 columns), because the launcher's VEC hints tell the
    compiler what the predicate checked."""
    facts_of = dict(zip(ALIGNED, aligned_facts))
    short, seen = {}, 0
    for dtype in compiled.DTYPES:
        for n in _eligible_widths(dtype):
            for weight in (dtype, None):
                for arch in compiled.ARCHS:
                    spec = _forward_key(n, dtype, weight, arch)
                    r = facts_of[spec]
                    seen += 1
                    assert compiled.vector_bytes_expected(spec) == 16
                    if r["load_bytes"] != 16 or r["store_bytes"] != 16:
                        short.setdefault(spec.label(), (n, r["load_bytes"], r["store_bytes"]))
    assert seen == 4 * sum(len(_eligible_widths(d)) for d in compiled.DTYPES)
    assert not short, f"narrower than 16-byte row accesses (label: first width, load bytes, store bytes): {short}"


def test_triton_marking_the_integers_changes_nothing(aligned_facts):
    """An aligned specialization is compiled without Triton's own tt.divisibility=16 on the strides and the width
    (eligible widths like 100 do not get it). Widths that are multiples of 16 elements do; with the VEC hints that
    changes nothing in the code: the PTX is the same, so the facts above hold for both."""
    # a sample across kernels, dtypes, both architectures and the block range (each is a fresh compile: the mark
    # changes Triton's cache key)
    sample = _marked_sample()
    assert len(sample) >= 30 and {(s.kernel, s.dtype) for s in sample} == {(k, d) for k in launch.KERNELS
                                                                             for d in compiled.DTYPES}
    marked = _facts(MARKED)
    facts_of = dict(zip(ALIGNED, aligned_facts))
    differ = [s.label() for s, m in zip(sample, marked) if m["ptx_sha256"] != facts_of[s]["ptx_sha256"]]
    assert all(m["int_div16"] for m in marked) and not differ, differ


def test_backward_row_accesses_are_vectorized_from_1024_columns(aligned_facts):
    """The backward holds one row per program: 16-byte accesses once each thread has 8 or more elements (at every
    eligible width of those blocks: the aligned binaries carry no mark of Triton's on the width)."""
    for spec, r in zip(ALIGNED, aligned_facts):
        if spec.kernel == "backward" and spec.block >= 1024:
            assert r["load_bytes"] == 16 and r["store_bytes"] == 16, spec.label()


def test_misaligned_forward_is_scalar(misaligned_facts, aligned_facts):
    """Without 16-byte-aligned pointers (and VEC = 1: no hints) every access is one element, at every block; the
    aligned launch of the same block moves 16 bytes."""
    aligned = {(r["arch"], r["dtype"], r["block"]): r for r in aligned_facts if r["kernel"] == "forward"
               and r["weight"] != "none"}
    assert {r["block"] for r in misaligned_facts} == set(compiled.eligible_widths())
    for spec, r in zip(MISALIGNED, misaligned_facts):
        elem = compiled.vector_bytes_expected(spec)
        assert r["vec"] == 1 and elem == (4 if r["dtype"] == "float32" else 2)
        assert r["load_bytes_max"] == elem and r["store_bytes_max"] == elem, r
        if (r["arch"], r["dtype"], r["block"]) in aligned:
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
    rows = _facts(ALIGNED[:3])
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


def test_a_few_specializations_compile_in_one_process(monkeypatch):
    """Each worker process imports torch and Triton (about 3 CPU-s) and a compile takes about 0.3 s: a lesson's few
    specializations compile in one process, a long list in at most two, and a caller's ``workers`` is kept."""
    seen = []
    monkeypatch.setattr(compiled, "missing_tools", lambda: None)
    monkeypatch.setattr(compiled, "_run_workers", lambda todo, workers, timeout: seen.append(workers) or
                        [{"n": i} for i in range(len(todo))])
    monkeypatch.setattr(compiled, "_cache", {})
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    specs = compiled.specializations(archs=(80, 90))
    assert len(specs) > 16
    for n, workers in ((1, None), (2, None), (8, None), (9, None), (len(specs), None), (2, 2)):
        compiled._cache.clear()
        compiled.facts(specs[:n], workers=workers)
    assert seen == [1, 1, 1, 2, 2, 2]


def test_resource_facts_are_kept_beside_the_cached_binary(tmp_path, monkeypatch):
    """A warm compile loads Triton's cached binary without a ptxas log; the facts computed the first time are kept
    under the same cache key and read back instead of running ptxas again. A cache that cannot be written costs a
    rerun, never a wrong or missing fact."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    runs = []

    def rerun(registers):
        return lambda: runs.append(registers) or {"registers": registers, "spills": 0, "ptxas_log": "rerun"}

    assert compiled._kept("a" * 64, rerun(40)) == {"registers": 40, "spills": 0, "ptxas_log": "rerun"}
    assert compiled._kept("a" * 64, rerun(99))["registers"] == 40 and runs == [40]  # read back, not recomputed
    assert compiled._kept("b" * 64, rerun(41))["registers"] == 41 and runs == [40, 41]  # another binary, its own
    (tmp_path / "cache").chmod(0o500)
    try:
        assert compiled._kept("c" * 64, rerun(42))["registers"] == 42 and runs[-1] == 42
    finally:
        (tmp_path / "cache").chmod(0o700)


def test_facts_do_not_depend_on_where_the_kit_sits(tmp_path):
    """A binary Triton cached from another checkout of the kit (same source, another path) gives the same facts and
    the same code hash as one compiled here: the PTX names its source files, Triton's cache key does not."""
    import os
    import shutil
    import subprocess
    import sys

    other = tmp_path / "another checkout"
    shutil.copytree(ROOT / "fastpath_lib", other / "fastpath_lib", ignore=shutil.ignore_patterns("__pycache__"))
    spec = dataclasses.asdict(compiled.Specialization("forward", "bfloat16", "bfloat16", 128, 4, 8, True, 90))
    rows = {}
    for name, root, cache in (("there", other, "shared"), ("here", ROOT, "shared"), ("fresh", ROOT, "fresh")):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.update(PYTHONPATH=str(root), TRITON_CACHE_DIR=str(tmp_path / cache))
        out = tmp_path / f"{name}.json"
        proc = subprocess.run([sys.executable, "-m", "fastpath_lib.rmsnorm.compiled", str(out)], cwd=root, env=env,
                              input=json.dumps([spec]), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (rows[name],) = json.loads(out.read_text())
    # with Triton 3.8 "here" loads the other checkout's binary (its cache key has no path); its PTX names that path
    assert not rows["fresh"]["from_cache"]
    skip = ("from_cache", "ptxas_log", "cubin_registers", "compile_s")
    assert {k: v for k, v in rows["here"].items() if k not in skip} == \
        {k: v for k, v in rows["fresh"].items() if k not in skip}
    assert rows["there"]["ptx_sha256"] == rows["here"]["ptx_sha256"] == rows["fresh"]["ptx_sha256"]


def test_code_hash_reads_code_not_paths():
    ptx = ('\t.loc\t1 63 1 // kernels.py:63:1\n\tret;\n\t.file\t1 "/a/fastpath_lib/rmsnorm/kernels.py"\n'
           '\t.section\t.debug_info\n\t{\n.b8 47 // /a\n\t}\n\t.section\t.debug_macinfo\t{\t}\n')
    moved = ptx.replace("/a", "/somewhere/else").replace("47 //", "115 //")
    assert compiled.code_sha256(ptx) == compiled.code_sha256(moved)
    assert compiled.code_sha256(ptx) != compiled.code_sha256(ptx.replace("ret;", "exit;"))


_BF16_ROUNDING = '''
import json, os, re, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fastpath_lib.fused import kernels as fused
from fastpath_lib.rmsnorm import kernels as rms
from fastpath_lib import triton_casts
found = {}
# both branches in one process (a process start imports torch and Triton): the GPU's first, then the interpreter's,
# each compiled into its own cache folder, so that no binary of one is read for the other (a kernel's cache key is
# computed once per process, before INTERPRETED changes)
for branch in ("gpu", "interpreter-branch"):
    os.environ["TRITON_CACHE_DIR"] = os.path.join(sys.argv[1], branch)
    if branch == "interpreter-branch":
        triton_casts.INTERPRETED = tl.constexpr(True)
    found[branch] = {}
    for fn in (rms.rms_norm_fwd_kernel, fused.fused_add_rms_norm_fwd_kernel):
        for x, w in (("bf16", "bf16"), ("fp32", "bf16"), ("bf16", "fp32")):
            sig = {n: ("*" + (w if n == "W_ptr" else x)) if n.endswith("_ptr") else "i32" for n in fn.arg_names}
            const = {"HAS_WEIGHT": True, "ROWS_PER_PROGRAM": 1, "BLOCK_SIZE": 64, "VEC": 1}
            sig.update(eps="fp32", **{k: "constexpr" for k in const})
            ptx = triton.compile(ASTSource(fn, sig, const), target=GPUTarget("cuda", 90, 32),
                                 options={"num_warps": 4}).asm["ptx"]
            found[branch][f"{fn.__name__}: x {x}, weight {w}"] = {
                "cvt": sorted(set(re.findall(r"cvt\\.\\w+\\.bf16\\.f32", ptx))),
                "bits": "32767" in ptx or "2143289344" in ptx}
print(json.dumps(found))
'''


def test_bf16_rounding_on_a_gpu_is_tritons_own_conversion(tmp_path):
    """On a GPU both forwards round fp32 to bf16 with Triton's conversion (``cvt.rn.bf16.f32``: to nearest even, a
    NaN stays NaN); the rounding on the bits that keeps the interpreter faithful (``0x7FFF``, the canonical NaN
    ``0x7FC00000``) is compiled out. The interpreter's branch, compiled on purpose, shows what it would be."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _BF16_ROUNDING, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert len(found["gpu"]) == 6 and {p.name for p in tmp_path.iterdir()} == set(found)  # a cache folder each
    for case, gpu in found["gpu"].items():
        rounds = not case.startswith("rms_norm_fwd_kernel: x fp32")  # RMSNorm of fp32 x computes and stores fp32
        assert gpu == {"cvt": ["cvt.rn.bf16.f32"] if rounds else [], "bits": False}, (case, gpu)
        assert found["interpreter-branch"][case] == {"cvt": [], "bits": rounds}, (case, found["interpreter-branch"])
