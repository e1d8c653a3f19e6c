"""The launch rule of the RMSNorm kernels: block size, warps and rows per program, from the row width.

The one place of the rule: the launchers in :mod:`fastpath_lib.rmsnorm.kernels` (which re-exports these names), the
compiled-code facts (:mod:`fastpath_lib.rmsnorm.compiled`) and the benchmark's specialization count all call it. It
imports neither Triton nor the kernels, so asking which binaries a width launches changes nothing about whether the
kernels are later decorated for CUDA or for the interpreter.

Why these numbers, from the compiled code (``python -c "from fastpath_lib.rmsnorm import compiled; print(
compiled.facts_markdown())"``):

* wider rows get more warps, so each thread holds at most 16 elements of a row (32 in the forward at 16384 columns);
* the backward keeps a ``dw`` accumulator beside the row, and gets 32 warps from 8192 columns on: with 16 warps its
  threads spill to local memory (at 16384 columns they need more than the 128 registers a thread of a 512-thread
  program can have; at 8192, fp32 on sm_80, ptxas keeps to 64 registers and spills 16 bytes);
* the backward's fp32 rows of the 16384 block (wider than 8192 columns) get one row per program
  (:func:`backward_max_rows`): with 2 or 4 rows the loop carries ``dw`` and spills 32 to 60 bytes on sm_86, sm_89
  and sm_120; with one row no target spills. Its price is one fp32 partial-``dw`` row per input row (scratch as large
  as the input), not measured on a GPU;
* the forward normalizes several narrow rows per program, so every thread holds at least 8 elements: a 16-byte
  vector of fp16/bf16, two of fp32. One 128-column row per 4-warp program would give each thread one element, loaded
  and stored with 2-byte scalar accesses;
* ``VEC`` (:func:`vector_elements`) tells the kernels that a launch is 16-byte aligned. Triton sees by itself that a
  pointer is 16-byte aligned, but of an integer argument it only knows whether it is a multiple of 16 *elements*, so
  an eligible fp32 row of width 100 (400 bytes, every row on a 16-byte boundary) or an fp16 row of width 24 compiles
  to scalar accesses without it. The launcher checks the alignment itself (tests also launch the kernels on misaligned
  layouts) and passes ``VEC``; the kernels turn it into ``tl.multiple_of`` hints on the row strides and the width.

The rule is spill-free with the Triton CI installs (3.8) on all six targets the compiled-code facts cover (sm_75,
sm_80, sm_86, sm_89, sm_90, sm_120). Triton 3.6 (ptxas 12.8, the GPU machine's) spills 8 to 16 bytes in 4 of its
specializations for sm_80 and sm_90 (forward bf16 at 8192 columns on sm_80; backward fp16/bf16 at 8192, 1 row per
program, on sm_80; backward bf16 at 4096, 2 rows, on sm_90); fp32 at 16384 spills 24 to 88 bytes there with 2 or 4
rows and none with the one-row limit. Other warp counts remove two of them (forward 8192 at 8 or 32 warps, backward
4096 at 16) but not the others: the backward at 8192 with 16 warps spills elsewhere. Nor does a register budget:
``maxnreg`` set to the whole register file per program (255, 128, 64 registers at 8, 16, 32 warps) removes the three
32-register spills and the 4096-column one on 3.6, but raises the register count of many specializations (the
4096-column one from 64 to 113, halving the programs a multiprocessor holds), leaves fp32 at 16384 with 2 or more rows
spilling, and makes Triton 3.8 spill there too (an explicit ``.maxnreg 64`` is not the same as ptxas's own cap for 1024
threads). These are compile-time facts, not times, so the rule stays as it is until a GPU run says otherwise;
``tests/rmsnorm/test_compiled.py`` lists the 3.6 spills.
"""

from __future__ import annotations

from fastpath_lib.rmsnorm.predicate import ALIGN_BYTES, MAX_COLS

__all__ = ["KERNELS", "MIN_ELEMENTS_PER_THREAD", "backward_grid", "backward_max_rows", "forward_rows_per_program",
           "launch_settings", "vector_elements"]

#: The kernels by the short name the launch rule and the compiled-code facts use.
KERNELS = ("forward", "backward")
#: Elements each forward thread should hold at least: 8 fp16/bf16 values fill one 16-byte vector access.
MIN_ELEMENTS_PER_THREAD = 8


def _next_power_of_2(n: int) -> int:
    return 1 << (max(n, 1) - 1).bit_length()


def launch_settings(n_cols: int, kernel: str = "forward") -> tuple[int, int]:
    """``(BLOCK_SIZE, num_warps)`` for a row width: the next power of two, and more warps for wider rows.

    Args:
        n_cols: the row width (at most ``MAX_COLS``).
        kernel: ``"forward"`` or ``"backward"``. They differ at the widest rows only: the backward keeps a ``dw``
            accumulator beside each row and gets 32 warps from 8192 columns on, where 16 warps spill registers
            to local memory.

    Raises:
        ValueError: ``n_cols > MAX_COLS`` (the predicate sends such rows to the fallback), or an unknown kernel.

    >>> launch_settings(4096), launch_settings(16384), launch_settings(8192, "backward")
    ((4096, 8), (16384, 16), (8192, 32))
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if n_cols > MAX_COLS:
        raise ValueError(f"n_cols={n_cols} exceeds MAX_COLS={MAX_COLS}; the predicate should have sent this to the "
                         f"fallback")
    block = _next_power_of_2(n_cols)
    num_warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    if kernel == "backward" and block >= 8192:
        num_warps = 32
    return block, num_warps


def forward_rows_per_program(n_cols: int) -> int:
    """Rows of the forward's tile: enough that each of its ``32 * num_warps`` threads holds 8 elements or more.

    >>> [forward_rows_per_program(n) for n in (128, 256, 1024, 16384)]
    [8, 4, 1, 1]
    """
    block, num_warps = launch_settings(n_cols, "forward")
    return max(1, MIN_ELEMENTS_PER_THREAD * 32 * num_warps // block)


def backward_max_rows(n_cols: int, element_size: int) -> int | None:
    """The most rows one backward program may own at this width and element size, or ``None`` for no limit.

    fp32 rows of the widest block (16384 columns, 32 warps) get one row per program. With 2 or more rows the loop
    carries the 16384-wide ``dw`` accumulator from row to row, and the compiled kernel spills to local memory on
    three of the six targets the compiled-code facts cover (Triton 3.8: 32 bytes on sm_86 and sm_89 at 4 rows, 60 and
    52 bytes on sm_120 at 2 and 4 rows); one row per program (no loop) spills on none of sm_75, sm_80, sm_86, sm_89,
    sm_90, sm_120. Neither a one-stage loop, nor dropping the eviction hints, nor a reordered ``dx``, nor 16 warps
    removes those spills. The price: one fp32 partial-``dw`` row per input row, so the scratch the backward writes
    and ``torch.sum`` reads back is as large as the fp32 input itself (``n_rows x 16384 x 4`` bytes) where other
    widths have at most ``4 * multiprocessors`` rows. Spills counted by compiling for the six targets; neither cost is
    measured on a GPU. fp16/bf16 rows, and every narrower block, spill with none of 1, 2 or 4 rows: no limit there.

    >>> backward_max_rows(16384, 4), backward_max_rows(9000, 4), backward_max_rows(16384, 2), backward_max_rows(8192, 4)
    (1, 1, None, None)
    """
    block, _ = launch_settings(n_cols, "backward")
    return 1 if element_size >= 4 and block >= MAX_COLS else None  # the widest block


def backward_grid(n_rows: int, max_programs: int, max_rows: int | None = None) -> tuple[int, int]:
    """``(ROWS_PER_PROGRAM, programs)`` of the backward: at most ``max_programs`` programs, power-of-two row blocks.

    The launcher asks for ``4 * multiprocessors`` programs on CUDA and 4 under the interpreter, and passes
    :func:`backward_max_rows` as ``max_rows`` (a power of two): where it is set, the row block is at most that, and
    the programs can exceed ``max_programs``.

    >>> backward_grid(4096, 4 * 132), backward_grid(37, 4), backward_grid(37, 4, max_rows=1)
    ((8, 512), (16, 3), (1, 37))
    """
    rows_per_program = _next_power_of_2(-(-n_rows // max(1, min(n_rows, max_programs))))
    if max_rows is not None:
        rows_per_program = min(rows_per_program, max_rows)
    return rows_per_program, -(-n_rows // rows_per_program)


def vector_elements(element_size: int, n_cols: int, row_strides, data_ptrs) -> int:
    """``VEC`` of a launch: the elements in one 16-byte vector when the launch is 16-byte aligned, else 1.

    Aligned means: the row width and every row stride (in elements of ``element_size`` bytes) are whole 16-byte
    vectors, and every data pointer is a multiple of 16 bytes; what the predicate's alignment conditions guarantee for
    an eligible call. The kernels promise the compiler ``VEC``-element multiples on that basis, so the launcher checks
    it on every launch rather than trusting the caller.

    Args:
        element_size: bytes per element of the rows (``x.element_size()``).
        n_cols: the row width.
        row_strides: the row strides of every row operand, in elements.
        data_ptrs: the data pointers the kernel loads from or stores to with row offsets (and the weight's).

    >>> vector_elements(4, 100, (100, 100), (4096, 8192)), vector_elements(2, 24, (32,), (4096,))
    (4, 8)
    >>> vector_elements(2, 12, (12,), (4096,)), vector_elements(4, 100, (100,), (4100,))
    (1, 1)
    """
    vec = ALIGN_BYTES // element_size
    if vec <= 1 or ALIGN_BYTES % element_size:
        return 1
    aligned = (n_cols % vec == 0 and all(s % vec == 0 for s in row_strides)
               and all(p % ALIGN_BYTES == 0 for p in data_ptrs))
    return vec if aligned else 1
