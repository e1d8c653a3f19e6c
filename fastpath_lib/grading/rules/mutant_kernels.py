"""The Triton kernels behind the kernel mutants of :mod:`fastpath_lib.grading.rules.mutants`.

One forward and one backward kernel, each with a ``MUTANT`` constexpr switch (0 is the correct kernel, the same
arithmetic as :mod:`fastpath_lib.rmsnorm.kernels`). Every faulty variant stays inside the 16 poison elements
:class:`~fastpath_lib.cases.CaseSpec` and :func:`~fastpath_lib.cases.poisoned_like` put after each buffer, so a mutant
never touches memory it does not own. The launchers fix the number of backward programs (4) on every device, so
the row blocking a case exercises does not depend on the GPU it runs on.

Forward codes: 1 mean over the block instead of the row, 2 ignores the row stride, 3 unmasked tail (assumes rows
padded to 16 elements), 4 eps outside the square root, 5 weight always applied, 6 squares and sums in the input
dtype, 7 (launcher) eps default taken from the input dtype instead of the compute dtype.
Backward codes: 1 mean of ``g * n`` over the block, 2 ignores the input's row stride, 3 drops the last, partial
block of rows.
"""

from __future__ import annotations

import numpy as np
import torch

from fastpath_lib import runtime
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["run_forward", "run_backward", "BACKWARD_PROGRAMS"]

BACKWARD_PROGRAMS = 4
_kernels = None


def _get():
    global _kernels
    if _kernels is not None:
        return _kernels
    # the grader's own process launches these (exercise 04's verdicts): without CUDA they run in Triton's interpreter,
    # which must be on before triton is first imported (``python -m fastpath_lib grade`` without ./kit sets nothing)
    runtime.use_interpreter()
    import triton
    import triton.language as tl

    @triton.jit
    def mutant_fwd_kernel(
        X_ptr,  # input rows, last dim contiguous
        W_ptr,  # weight [n_cols] (X_ptr when there is none)
        Y_ptr,  # output rows, contiguous
        X_row_stride,  # elements between input rows
        Y_row_stride,  # elements between output rows
        n_cols,  # row width
        eps,  # added to the mean square
        HAS_WEIGHT: tl.constexpr,  # multiply by W
        BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols (>= n_cols rounded up to 16 for MUTANT 3)
        MUTANT: tl.constexpr,  # 0: correct; see the module docstring
    ):
        """RMSNorm forward with one seeded fault selected by MUTANT."""
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        if MUTANT == 3:
            mask = cols < (n_cols + 15) // 16 * 16
        else:
            mask = cols < n_cols
        if MUTANT == 2:
            x_row = X_ptr + row * n_cols
        else:
            x_row = X_ptr + row * X_row_stride
        raw = tl.load(x_row + cols, mask=mask, other=0.0)
        x = raw.to(tl.float32)
        if MUTANT == 1:
            mean_sq = tl.sum(x * x, axis=0) / BLOCK_SIZE
        elif MUTANT == 6:
            mean_sq = tl.sum(raw * raw, axis=0).to(tl.float32) / n_cols
        else:
            mean_sq = tl.sum(x * x, axis=0) / n_cols
        if MUTANT == 4:
            rstd = 1.0 / (tl.sqrt(mean_sq) + eps)
        else:
            rstd = 1.0 / tl.sqrt(mean_sq + eps)
        y = x * rstd
        if HAS_WEIGHT or MUTANT == 5:
            y = y * tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def mutant_bwd_kernel(
        DY_ptr,  # upstream gradient rows, contiguous
        X_ptr,  # forward input rows, last dim contiguous
        W_ptr,  # weight [n_cols] (X_ptr when there is none)
        DX_ptr,  # input gradient rows, contiguous
        DW_partial_ptr,  # fp32 [programs, n_cols]
        DY_row_stride,  # elements between rows of DY
        X_row_stride,  # elements between rows of X
        DX_row_stride,  # elements between rows of DX
        n_rows,  # number of rows
        n_cols,  # row width
        eps,  # added to the mean square
        ROWS_PER_PROGRAM: tl.constexpr,  # contiguous block of rows per program
        HAS_WEIGHT: tl.constexpr,  # multiply by W and produce dw
        BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
        MUTANT: tl.constexpr,  # 0: correct; see the module docstring
    ):
        """RMSNorm backward with one seeded fault selected by MUTANT."""
        pid = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        if HAS_WEIGHT:
            w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        else:
            w = tl.full((BLOCK_SIZE,), 1.0, tl.float32)
        if MUTANT == 3:
            last = n_rows - n_rows % ROWS_PER_PROGRAM
        else:
            last = n_rows
        dw_acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
        for i in range(0, ROWS_PER_PROGRAM):
            row = pid * ROWS_PER_PROGRAM + i
            m = mask & (row < last)
            if MUTANT == 2:
                x_row = X_ptr + row * n_cols
            else:
                x_row = X_ptr + row * X_row_stride
            x = tl.load(x_row + cols, mask=m, other=0.0).to(tl.float32)
            dy = tl.load(DY_ptr + row * DY_row_stride + cols, mask=m, other=0.0).to(tl.float32)
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
            n = x * rstd
            g = dy * w
            if MUTANT == 1:
                dx = rstd * (g - n * (tl.sum(g * n, axis=0) / BLOCK_SIZE))
            else:
                dx = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
            tl.store(DX_ptr + row * DX_row_stride + cols, dx.to(DX_ptr.dtype.element_ty), mask=m)
            dw_acc += dy * n
        if HAS_WEIGHT:
            tl.store(DW_partial_ptr + pid * n_cols + cols, dw_acc, mask=mask)

    _kernels = (mutant_fwd_kernel, mutant_bwd_kernel)
    return _kernels


def run_forward(code: int, x2d: torch.Tensor, weight: torch.Tensor | None, eps: float | None,
                out: torch.Tensor) -> None:
    """Launch forward variant ``code`` (0 = correct) into ``out`` (a ``[rows, cols]`` view); ``eps=None`` is the
    default eps (resolved wrongly by variant 7)."""
    fwd, _ = _get()  # first: it opts in to the interpreter before triton is imported
    import triton

    n_rows, n_cols = x2d.shape
    if eps is None:
        eps = torch.finfo(x2d.dtype).eps if code == 7 else rms.default_eps(x2d.dtype)
    block = triton.next_power_of_2(max(n_cols, 1))
    if code == 3:
        block = triton.next_power_of_2((n_cols + 15) // 16 * 16)
    with np.errstate(all="ignore"):
        fwd[(n_rows,)](x2d, weight if weight is not None else x2d, out, x2d.stride(0), out.stride(0), n_cols,
                       eps, HAS_WEIGHT=weight is not None, BLOCK_SIZE=block, MUTANT=code if code != 7 else 0)


def run_backward(code: int, dy2d: torch.Tensor, x2d: torch.Tensor, weight: torch.Tensor | None, eps: float,
                 dx_out: torch.Tensor, programs: int = 0) -> torch.Tensor | None:
    """Launch backward variant ``code`` (0 = correct) writing dx into ``dx_out``, on ``programs`` programs at most
    (0: :data:`BACKWARD_PROGRAMS`); returns dw (``None`` without a weight)."""
    _, bwd = _get()  # first: it opts in to the interpreter before triton is imported
    import triton

    n_rows, n_cols = x2d.shape
    most = programs or BACKWARD_PROGRAMS
    rows_per_program = triton.next_power_of_2(triton.cdiv(n_rows, max(1, min(n_rows, most))))
    programs = triton.cdiv(n_rows, rows_per_program)
    has_w = weight is not None
    partial = torch.zeros((programs if has_w else 1, n_cols), dtype=torch.float32, device=x2d.device)
    with np.errstate(all="ignore"):
        bwd[(programs,)](dy2d, x2d, weight if has_w else x2d, dx_out, partial, dy2d.stride(0), x2d.stride(0),
                         dx_out.stride(0), n_rows, n_cols, eps, ROWS_PER_PROGRAM=rows_per_program,
                         HAS_WEIGHT=has_w, BLOCK_SIZE=triton.next_power_of_2(max(n_cols, 1)), MUTANT=code)
    return partial.sum(0).to(weight.dtype) if has_w else None
