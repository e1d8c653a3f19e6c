"""Triton RMSNorm kernels (forward, backward) and their launchers.

Forward, one program per row of ``n_cols`` elements, accumulated in fp32::

    rstd = 1 / sqrt(mean(x ** 2) + eps)
    y    = (x * rstd * w)            rounded once to the input dtype (as torch.nn.functional.rms_norm does)

Backward, with ``n = x * rstd`` and ``g = dy * w`` (all in fp32)::

    dx = rstd * (g - n * mean(g * n))
    dw = sum over rows of (dy * n)

``dw`` is reduced deterministically: each program sums a fixed, contiguous block of rows into its own row of an fp32
partial buffer, and the partial rows are then summed by ``torch.sum`` in a fixed order. The same input gives the same
bits on every run.

This module imports Triton and decorates kernels at import time, so ``TRITON_INTERPRET`` must be set before it is
imported (:mod:`fastpath_lib.runtime` does that). The launchers assume the caller checked eligibility
(:mod:`fastpath_lib.rmsnorm.predicate`): 2-D views whose last dimension is contiguous, ``n_cols <= MAX_COLS``.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import triton
import triton.language as tl

from fastpath_lib.rmsnorm.predicate import MAX_COLS

__all__ = ["rms_norm_fwd_kernel", "rms_norm_bwd_kernel", "forward", "backward", "launch_settings"]


@triton.jit
def rms_norm_fwd_kernel(
    X_ptr,  # input rows, [n_rows, n_cols], last dim contiguous
    W_ptr,  # weight [n_cols] (ignored when HAS_WEIGHT is False)
    Y_ptr,  # output rows, [n_rows, n_cols], contiguous
    X_row_stride,  # elements between consecutive input rows
    Y_row_stride,  # elements between consecutive output rows
    n_cols,  # row width
    eps,  # added to the mean square
    HAS_WEIGHT: tl.constexpr,  # multiply by W
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
):
    """y = x * rstd * w for one row; rstd = 1 / sqrt(mean(x^2) + eps), all in fp32."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    y = x * rstd
    if HAS_WEIGHT:
        w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = y * w
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_bwd_kernel(
    DY_ptr,  # upstream gradient rows, [n_rows, n_cols], contiguous
    X_ptr,  # forward input rows, [n_rows, n_cols], last dim contiguous
    W_ptr,  # weight [n_cols] (ignored when HAS_WEIGHT is False)
    DX_ptr,  # input gradient rows, [n_rows, n_cols], contiguous
    DW_partial_ptr,  # fp32 [n_programs, n_cols]: this program's share of dw
    DY_row_stride,  # elements between rows of DY
    X_row_stride,  # elements between rows of X
    DX_row_stride,  # elements between rows of DX
    n_rows,  # number of rows
    n_cols,  # row width
    eps,  # added to the mean square
    ROWS_PER_PROGRAM: tl.constexpr,  # contiguous block of rows each program owns (a power of two)
    HAS_WEIGHT: tl.constexpr,  # multiply by W, and produce dw
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
):
    """dx = rstd * (g - n * mean(g * n)) with n = x * rstd, g = dy * w; dw partial = sum of dy * n over own rows."""
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    if HAS_WEIGHT:
        w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        w = tl.full((BLOCK_SIZE,), 1.0, tl.float32)
    dw_acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    # a constexpr trip count with a row mask: the Triton 3.6 interpreter cannot loop over runtime scalar bounds
    # with numpy 2, and power-of-two buckets keep the number of specializations small
    for i in range(0, ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        m = mask & (row < n_rows)
        x = tl.load(X_ptr + row * X_row_stride + cols, mask=m, other=0.0).to(tl.float32)
        dy = tl.load(DY_ptr + row * DY_row_stride + cols, mask=m, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        n = x * rstd
        g = dy * w
        dx = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
        tl.store(DX_ptr + row * DX_row_stride + cols, dx.to(DX_ptr.dtype.element_ty), mask=m)
        dw_acc += dy * n
    if HAS_WEIGHT:
        tl.store(DW_partial_ptr + pid * n_cols + cols, dw_acc, mask=mask)


def launch_settings(n_cols: int) -> tuple[int, int]:
    """``(BLOCK_SIZE, num_warps)`` for a row width: the next power of two, and more warps for wider rows."""
    if n_cols > MAX_COLS:
        raise ValueError(f"n_cols={n_cols} exceeds MAX_COLS={MAX_COLS}; the predicate should have sent this to the "
                         f"fallback")
    block = triton.next_power_of_2(max(n_cols, 1))
    num_warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, num_warps


def _backward_programs(x: torch.Tensor, n_rows: int) -> int:
    if x.is_cuda:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        return max(1, min(n_rows, 4 * sms))
    return max(1, min(n_rows, 4))  # interpreter: programs run one after another; few of them is fastest


def _quiet():
    """Under the interpreter numpy warns on inf/nan arithmetic that a GPU performs silently; silence it there."""
    from fastpath_lib import runtime

    return np.errstate(all="ignore") if runtime.interpreter_enabled() else contextlib.nullcontext()


def forward(x2d: torch.Tensor, weight: torch.Tensor | None, eps: float, *,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch the forward kernel on a 2-D view ``[n_rows, n_cols]``; returns a new contiguous tensor of x's dtype.

    ``out`` (a row-major ``[n_rows, n_cols]`` view of x's dtype) is written instead when given: the guard-band tests
    pass a view inside a poisoned buffer.
    """
    n_rows, n_cols = x2d.shape
    y = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device) if out is None else out
    block, num_warps = launch_settings(n_cols)
    with _quiet():
        rms_norm_fwd_kernel[(n_rows,)](
            x2d, weight if weight is not None else x2d, y, x2d.stride(0), y.stride(0), n_cols, eps,
            HAS_WEIGHT=weight is not None, BLOCK_SIZE=block, num_warps=num_warps,
        )
    return y


def backward(dy2d: torch.Tensor, x2d: torch.Tensor, weight: torch.Tensor | None, eps: float, *,
             dx_out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Launch the backward kernel; returns ``(dx, dw)`` with dx of x's dtype and dw of the weight's (or ``None``).

    ``dy2d`` with a non-unit last stride (an expanded gradient) is made contiguous first. ``dx_out`` as ``out`` in
    :func:`forward`.
    """
    n_rows, n_cols = x2d.shape
    dy2d = dy2d if dy2d.stride(-1) == 1 else dy2d.contiguous()
    dx = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device) if dx_out is None else dx_out
    rows_per_program = triton.next_power_of_2(triton.cdiv(n_rows, _backward_programs(x2d, n_rows)))
    programs = triton.cdiv(n_rows, rows_per_program)
    has_w = weight is not None
    partial = torch.empty((programs if has_w else 1, n_cols), dtype=torch.float32, device=x2d.device)
    block, num_warps = launch_settings(n_cols)
    with _quiet():
        rms_norm_bwd_kernel[(programs,)](
            dy2d, x2d, weight if has_w else x2d, dx, partial,
            dy2d.stride(0), x2d.stride(0), dx.stride(0), n_rows, n_cols, eps,
            ROWS_PER_PROGRAM=rows_per_program, HAS_WEIGHT=has_w, BLOCK_SIZE=block, num_warps=num_warps,
        )
    dw = partial.sum(0).to(weight.dtype) if has_w else None
    return dx, dw
