"""A learner's kernel graded where it matters and as a GPU runs it (issue 41, attack round 9): bf16 arithmetic in a
kernel means what it means on a GPU (C9); every kernel part shows row offsets computed in int32, by its launcher's
launch run at a row past 2**31 elements (C7); ex08's dispatch part runs the fast path at the extremes of the region
the learner's own predicate admits (C8)."""

from __future__ import annotations

import re

import jupytext
import numpy as np
import pytest
import torch

from fastpath_lib import interpreted, runtime
from fastpath_lib.grading.checks import ex02_kernel, ex08_capstone
from fastpath_lib.grading.engine import far_rows, kernel_run, sources
from fastpath_lib.grading.rules import kernel_source

from tests.solved import ROOT  # noqa: E402
from tests.grading.test_grading_kernel_run import BACKWARD, KERNEL, _graded, _in_process, _proxy  # noqa: E402

interpreter_only = pytest.mark.skipif(not runtime.interpreter_enabled(), reason="Triton's interpreter only")

#: the sum taken in the input dtype (one correctly rounded add, as the spec's ``h = x + r``): right on a GPU, bit
#: pattern arithmetic under Triton's interpreter (attack 9, C9)
NATIVE_ADD = KERNEL.replace("""    x = tl.load(X + row * xs + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R + row * rs + cols, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(H.dtype.element_ty)""", """    x = tl.load(X + row * xs + cols, mask=mask, other=0.0)
    r = tl.load(R + row * rs + cols, mask=mask, other=0.0)
    h = x + r""")

BF16_OPS = '''
import triton
import triton.language as tl

@triton.jit
def ops(A, B, OUT, F, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(A + i)
    b = tl.load(B + i)
    tl.store(OUT + i, a + b)
    tl.store(OUT + N + i, a * b)
    tl.store(OUT + 2 * N + i, a - b)
    tl.store(OUT + 3 * N + i, tl.maximum(a, b) + (-a))
    tl.store(OUT + 4 * N + i, tl.where(a < b, a, b))
    tl.store(OUT + 5 * N + i, (a.to(tl.float32) * 1.01).to(tl.bfloat16))
    tl.store(F + i, a.to(tl.float32))
'''


@interpreter_only
def test_bf16_arithmetic_in_a_kernel_is_what_a_gpu_computes_in_the_grader():
    """Triton's interpreter adds, multiplies and orders bf16 as 16-bit integers (1.5 + 2.0 is NaN) and truncates
    its fp32-to-bf16 casts; under :func:`interpreted.as_on_gpu` each is the correctly rounded operation on the values,
    torch's, on the values where rounding shows (subnormals, signed zeros, infinities, NaN); outside it the
    interpreter is as it was."""
    ns: dict = {}
    exec(compile(BF16_OPS, "<ops>", "exec"), ns)  # noqa: S102 - the test's own kernel
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, generator=g).to(torch.bfloat16)
    b = torch.randn(64, generator=g).to(torch.bfloat16)
    a[:8] = torch.tensor([1.5, -2.0, 1e-40, -0.0, float("inf"), float("nan"), 3e38, -1e-39])
    b[:8] = torch.tensor([2.0, 0.5, 1e-40, 0.0, 1.0, 1.0, 3e38, 2e-39])
    expected = torch.cat([a + b, a * b, a - b, torch.maximum(a, b) - a, torch.where(a < b, a, b),
                          (a.float() * 1.01).to(torch.bfloat16)])

    def run():
        out, f = torch.empty(6 * 64, dtype=torch.bfloat16), torch.empty(64)
        with np.errstate(all="ignore"):
            ns["ops"][(1,)](a, b, out, f, N=64)
        return out, f
    with interpreted.as_on_gpu():
        out, f = run()
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16)) or torch.allclose(
        out.float(), expected.float(), rtol=0, atol=0, equal_nan=True), (out - expected).abs().max()
    assert torch.equal(f, a.float()) or torch.allclose(f, a.float(), rtol=0, atol=0, equal_nan=True)
    plain, _ = run()
    assert not torch.allclose(plain.float(), expected.float(), equal_nan=True)  # the patch was scoped to the block


def test_an_honest_kernel_adding_in_bf16_scores_in_the_grader_and_its_notebook():
    """Attack 9, C9: ``h = x + r`` on the loaded bf16 values (a GPU adds them correctly rounded) scored 0 with "got
    5.4e37, expected -1.5": the interpreter's bit-pattern sum reported as the learner's values."""
    assert NATIVE_ADD != KERNEL
    for check in [_graded] + ([_in_process] if runtime.interpreter_enabled() else []):
        r = check(NATIVE_ADD)
        assert r.passed, r.feedback
    assert sources  # the sources the graded check reads (test_grading_kernel_run._graded)


def _solution_cell(exercise: str, defines: str) -> str:
    """The source of the solution's code cell that defines ``defines``, its solution markers dropped."""
    (path,) = (ROOT / "solutions").glob(f"{exercise}_*.py")
    cell = next(c.source for c in jupytext.read(path).cells if c.cell_type == "code" and f"def {defines}(" in c.source)
    return "\n".join(ln for ln in cell.splitlines() if ln.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION"))


#: the solution's kernel and launcher, as the grader reads a learner's cell
SOFTMAX = ("import torch\nimport triton\nimport triton.language as tl\n\n"
           + _solution_cell("ex08", "softmax_kernel") + "\n")
#: the row offset in int32 (attack 9, C7): right on every input the grader can allocate
INT32 = "tl.program_id(0).to(tl.int64)", "tl.program_id(0)"


def _narrowed(source: str) -> str:
    """``source`` with each row offset computed in int64 and narrowed to int32 before it is added: the source rule
    (rules/row_offsets.py) sees no int32 product of a program id, the far row wraps as in int32."""
    return re.sub(r"\brow \* (\w+)", r"(row * \1).to(tl.int32)", source)


def _launcher(source: str, name: str):
    ns: dict = {}
    exec(compile(source, f"<{name}>", "exec"), ns)  # noqa: S102 - the test's own launcher, in the check cell
    return ns[name]


def _backward(source: str, here: bool):
    if here:
        return ex02_kernel.check_backward_with_saved_rstd(_launcher(source, "my_backward"), show=False)[0]
    with sources.using([source]):
        return ex02_kernel.check_backward_with_saved_rstd(_proxy("my_backward"), show=False)[0]


def _capstone_kernel(source: str, here: bool):
    if here:
        return ex08_capstone.check_capstone_kernel("softmax", _launcher(source, "launch"), show=False)[0]
    with sources.using([source]), kernel_run.lacking(ex08_capstone.ABSENT):
        return ex08_capstone.check_capstone_kernel("softmax", _proxy("launch"), show=False)[0]


def test_row_offsets_in_int32_fail_every_kernel_part_not_only_the_forward():
    """Attack 9, C7: ex02's backward and ex08's kernel with ``row = tl.program_id(0)`` (int32 row offsets, wrong past
    2**31 elements) scored full marks: only the forward had the overflow probe. The launcher's launch now runs one
    program at row 2**28 + 2 of 16 columns, on tensors of three rows; the int64 launchers still pass, in the grader
    (the replay's child) and in the notebook (the interpreter here). In the grader the source rule refuses an int32
    program id before anything runs (test_row_offsets_in_int32_fail_in_every_layout_and_int64_passes_in_each), so
    the grader's probe is given what the source rule passes: offsets computed in int64 and narrowed to int32."""
    assert BACKWARD.count(INT32[0]) == 1 and SOFTMAX.count(INT32[0]) == 1
    wheres = [False] + ([True] if runtime.interpreter_enabled() else [])
    for part, source, launcher in ((_backward, BACKWARD, "my_backward"), (_capstone_kernel, SOFTMAX, "launch")):
        narrowed = _narrowed(source)
        assert narrowed.count(".to(tl.int32)") >= 2 and kernel_source.launcher_problem(narrowed, launcher) is None
        for here in wheres:
            bad = part(source.replace(*INT32) if here else narrowed, here)
            assert not bad.passed and "row offsets wrap in int32" in bad.feedback, (part, here, bad.feedback)
            assert "tl.program_id(0).to(tl.int64)" in bad.feedback and "every case is right" in bad.feedback
    # the int64 launchers pass: in the notebook the solutions' own cells (test_grading_checks), in the grader the
    # backward's honest launcher (test_grading_kernel_run) and ex08's solution (test_grading's ex08 notebooks)


def _int32(source: str) -> str:
    """``source`` with every program id left in int32 (attack 10, D1's kernels)."""
    return re.sub(r"(tl\.program_id\(\d\))\.to\(tl\.int64\)", r"\1", source)


def _guarded(source: str) -> str:
    """The solution's softmax given the row count and guarding ``row < n_rows`` (a persistent kernel's guard)."""
    return (source.replace("Y_row_stride, n_cols,", "Y_row_stride, n_rows, n_cols,")
            .replace("mask = cols < n_cols", "mask = (cols < n_cols) & (row < n_rows)")
            .replace("y.stride(0), x2d.shape[1],", "y.stride(0), x2d.shape[0], x2d.shape[1],"))


def _two_rows(source: str) -> str:
    """:func:`_guarded` with two rows per program (a ``tl.static_range`` loop, half the programs)."""
    head, _, body = _guarded(source).partition("    row = tl.program_id(0).to(tl.int64)\n")
    body, _, tail = body.partition("\n\n\n")
    loop = "    for r in tl.static_range(2):\n        row = tl.program_id(0).to(tl.int64) * 2 + r\n"
    return (head + loop + "\n".join("    " + ln for ln in body.splitlines()) + "\n\n\n"
            + tail.replace("[(x2d.shape[0],)]", "[(triton.cdiv(x2d.shape[0], 2),)]"))


#: exercise 08's softmax in the layouts the far-row probe's one program per row on axis 0 does not move (attack 10,
#: D1): a row-count guard (a), a 2-D grid read on axis 1 (b), two rows per program (c), an early return, the offset
#: computed in a helper kernel; their int64 forms are honest
LAYOUTS = {
    "guard": _guarded(SOFTMAX),
    "grid (1, rows)": SOFTMAX.replace("tl.program_id(0)", "tl.program_id(1)").replace(
        "[(x2d.shape[0],)]", "[(1, x2d.shape[0])]"),
    "two rows per program": _two_rows(SOFTMAX),
    "early return": SOFTMAX.replace("Y_row_stride, n_cols,", "Y_row_stride, n_rows, n_cols,").replace(
        "    cols = tl.arange", "    if row >= n_rows:\n        return\n    cols = tl.arange").replace(
        "y.stride(0), x2d.shape[1],", "y.stride(0), x2d.shape[0], x2d.shape[1],"),
    "offset converted where it is used": SOFTMAX.replace("tl.program_id(0).to(tl.int64)", "tl.program_id(0)").replace(
        "row * X_row_stride", "row.to(tl.int64) * X_row_stride").replace(
        "row * Y_row_stride", "tl.cast(row, tl.int64) * Y_row_stride"),
    "a helper computes the offset": SOFTMAX.replace(
        "@triton.jit\ndef softmax_kernel", "@triton.jit\ndef _at(P, row, stride):\n    return P + row * stride\n\n\n"
        "@triton.jit\ndef softmax_kernel").replace(
        "X_ptr + row * X_row_stride", "_at(X_ptr, row, X_row_stride)").replace(
        "Y_ptr + row * Y_row_stride", "_at(Y_ptr, row, Y_row_stride)"),
    "converted on a line of its own": SOFTMAX.replace("row = tl.program_id(0).to(tl.int64)",
                                                      "row = tl.program_id(0)\n    row = row.to(tl.int64)"),
}
#: honest forms with no int32 form of their own
CONVERTED = ("offset converted where it is used", "converted on a line of its own")


def test_row_offsets_in_int32_fail_in_every_layout_and_int64_passes_in_each():
    """Attack 10, D1: the far-row probe moves program 2 of a launch of one program per row on axis 0, so int32 row
    offsets behind a ``row < n_rows`` guard (the kernel given the probe's row count, 3), on a 2-D grid, or two rows
    per program scored full marks (ex08 7/7, ex02 4/4). The source rule (:mod:`~fastpath_lib.grading.rules.
    row_offsets`) refuses each in the grader before anything runs; each layout's int64 form passes the rule."""
    for layout, source in LAYOUTS.items():
        assert source != SOFTMAX and compile(source, layout, "exec"), layout
        assert kernel_source.launcher_problem(source, "launch") is None, (layout, source)
        if layout in CONVERTED:
            continue
        bad = kernel_source.launcher_problem(_int32(source), "launch")
        assert bad and bad.startswith("row offsets wrap in int32") and "to(tl.int64)" in bad, (layout, bad)
        graded = _capstone_kernel(_int32(source), False)
        assert not graded.passed and graded.feedback.count("row offsets wrap in int32") == 1, graded.feedback
    guarded = _int32(BACKWARD.replace("n_cols, HAS_WEIGHT", "n_rows, n_cols, HAS_WEIGHT").replace(
        "mask = cols < n_cols", "mask = (cols < n_cols) & (row < n_rows)").replace(
        "h2d.stride(0), n_cols, HAS", "h2d.stride(0), n_rows, n_cols, HAS"))
    assert guarded.count("n_rows") >= 4
    bad = _backward(guarded, False)
    assert not bad.passed and "row offsets wrap in int32" in bad.feedback, bad.feedback
    # a product with a compile-time constant (a column tile) and values loaded from memory are not offsets to convert:
    # the backward's rstd loaded at an int32 row (no product) times h
    loaded = BACKWARD.replace("row = tl.program_id(0).to(tl.int64)", "row = tl.program_id(0)").replace(
        "row * hs", "row.to(tl.int64) * hs").replace("row * dys", "row.to(tl.int64) * dys").replace(
        "row * n_cols", "row.to(tl.int64) * n_cols")
    assert "tl.load(RSTD + row)" in loaded and "n = h * rstd" in loaded
    assert kernel_source.launcher_problem(loaded, "my_backward") is None
    tiles = LAYOUTS["grid (1, rows)"].replace("cols = tl.arange(0, BLOCK_SIZE)",
                                              "cols = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)")
    assert kernel_source.launcher_problem(tiles, "launch") is None
    # the two rows per program run right in the grader, as the solution's layout does
    good = _capstone_kernel(LAYOUTS["two rows per program"], False)
    assert good.passed, good.feedback


@interpreter_only
def test_the_far_program_runs_in_place_of_the_last_row_only_in_launches_of_that_many_programs():
    """The probe's interpreter hook: a launch of three programs runs programs 0, 1 and FAR, with
    ``tl.num_programs(0)`` FAR + 1; a launch of another size runs as it is; outside the block nothing is changed."""
    import triton
    import triton.language as tl

    @triton.jit
    def ids(OUT, N):
        pid = tl.program_id(0).to(tl.int64)
        tl.store(OUT + pid % 4 + 4 * (pid >= N), pid)
        tl.store(OUT + 8 + pid % 4, tl.num_programs(0).to(tl.int64))

    def run(grid):
        out = torch.full((12,), -1, dtype=torch.int64)
        ids[(grid,)](out, 3)
        return out.tolist()
    with interpreted.far_programs(far_rows.RUNS[1]):
        three, two = run(3), run(2)
    far = far_rows.FAR
    assert three[:2] == [0, 1] and three[4 + far % 4] == far and three[8] == far + 1, three
    assert two[:2] == [0, 1] and two[8:10] == [2, 2], two
    assert run(3)[:3] == [0, 1, 2]


CAPSTONE = SOFTMAX + """
from fastpath_lib.eligibility import Boundary, Condition, Predicate

MAX_COLS = 8192

def make_predicate():
    def cols(x):
        return None if 0 < x.shape[-1] <= MAX_COLS else f"{x.shape[-1]} columns"

    def layout(x):
        ok = x.dim() == 2 and x.stride(-1) == 1 and x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        return None if ok else "not a 2-d fp16/bf16/fp32 row-major tensor"

    return Predicate("softmax", [
        Condition("cols", "1..8192 columns", cols, "shape",
                  boundaries=(Boundary("cols=max", {"cols": MAX_COLS}, True),
                              Boundary("cols=max+1", {"cols": MAX_COLS + 1}, False))),
        Condition("layout", "2-d, stride 1, fp16/bf16/fp32", layout, "stride",
                  boundaries=(Boundary("row slice", {"layout": "row_slice", "pad": 3}, True),
                              Boundary("transposed", {"layout": "transposed"}, False)))])

def softmax(x):
    d = make_predicate().evaluate(x)
    return (launch(x), d.route) if d.eligible else (torch.softmax(x, dim=-1), d.route)
"""
#: attack 9, C8: the launcher caps its block ("registers") while the predicate admits 8192 columns: every row wider
#: than 1024 comes out wrong, and no input of the checks was wider than 781 columns
CAPPED = CAPSTONE.replace("BLOCK_SIZE=triton.next_power_of_2(x2d.shape[1]))",
                          "BLOCK_SIZE=min(triton.next_power_of_2(x2d.shape[1]), 1024))")


@interpreter_only
def test_the_dispatch_part_runs_the_fast_path_at_the_widest_width_the_predicate_admits():
    """Attack 9, C8: the capped launcher scored 7/7. The dispatch part finds, from the learner's predicate, the
    widest width it admits (8192 here, exactly) and the narrowest, each at its fewest rows, and calls the op there;
    the honest notebook passes."""
    assert CAPPED != CAPSTONE
    results = {}
    for name, source in (("honest", CAPSTONE), ("capped", CAPPED)):
        ns: dict = {}
        exec(compile(source, f"<{name}>", "exec"), ns)  # noqa: S102 - the test's own notebook
        (results[name],) = ex08_capstone.check_capstone_dispatch("softmax", ns["softmax"], ns["make_predicate"],
                                                                 lambda x: x, show=False)
    assert results["honest"].passed, results["honest"].feedback
    capped = results["capped"]
    assert not capped.passed and "1 of 8 cases wrong" in capped.feedback, capped.feedback
    assert "1x8192 float32" in capped.feedback and "the widest width your predicate admits" in capped.feedback


def test_the_region_is_the_predicates_own():
    """The extremes come from the predicate: a width limit found exactly by bisection, a row threshold as the fewest
    rows, an unbounded width probed at MAX_COLS; every point returned is admitted."""
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.grading.rules import region

    def limited(spec):
        return 3 <= spec.cols <= 5000 and spec.rows >= 4
    got = dict(region.extremes(limited, CaseSpec(8, 48, weight=None)))
    wide, narrow = got["the widest width your predicate admits"], got["the narrowest width your predicate admits"]
    assert (wide.rows, wide.cols, narrow.rows, narrow.cols) == (4, 5000, 4, 3)
    (_, unbounded), _ = region.extremes(lambda spec: True, CaseSpec(8, 48, weight=None))
    assert (unbounded.rows, unbounded.cols) == (1, region.MAX_COLS)
