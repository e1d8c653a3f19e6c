"""Triton RMSNorm kernels (forward, backward) and their launchers.

Forward, row by row over ``n_cols`` elements, accumulated in fp32::

    rstd = 1 / sqrt(mean(x ** 2) + eps)
    y    = (x * rstd * w)            rounded once to the input dtype (as torch.nn.functional.rms_norm does)

Each forward program normalizes a tile of ``ROWS_PER_PROGRAM`` rows: narrow rows share a program so that every thread
holds at least 8 elements (16 bytes of fp16/bf16), which is what lets the compiler use 16-byte vector loads and stores.
With one 128-column row per 4-warp program each thread would hold one element and access it with a 2-byte scalar load.
Holding 8 elements is not enough by itself: the compiler must also know that each thread's 16 bytes are aligned and
either all inside the row or all past its end. Of an integer argument Triton only knows whether it is a multiple of 16
*elements*, so at an eligible width such as fp32 100 or fp16 24 it knew neither; the launcher checks the 16-byte
alignment of the launch and passes ``VEC`` (elements per 16-byte vector, 1 when not aligned), and the kernels hint the
row strides and the width as multiples of it (``tl.multiple_of``). Every eligible width then loads and stores 16 bytes
at a time.

Backward, with ``n = x * rstd`` and ``g = dy * w`` (all in fp32)::

    dx = rstd * (g - n * mean(g * n))
    dw = sum over rows of (dy * n)

The backward reads each row twice: a first read for the two row sums (asking the cache to keep the row), a second one
for ``dx`` and ``dw``, so that between rows only the ``dw`` accumulator stays in registers. Holding ``x``, ``dy``,
``w`` and ``dw`` of a 16384-wide row at once, 16 warps would need more registers than a thread has and the compiled
kernel would spill to local memory; with the second read and 32 warps for rows of 8192 columns and more, no
specialization spills (:mod:`fastpath_lib.rmsnorm.compiled` reads these facts from the code compiled for sm_80 and
sm_90).

Block size, warps and rows per program come from one rule, :mod:`fastpath_lib.rmsnorm.launch` (re-exported here).

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

from fastpath_lib.rmsnorm.launch import (
    KERNELS,
    backward_grid,
    backward_max_rows,
    forward_rows_per_program,
    launch_settings,
    vector_elements,
)
from fastpath_lib.triton_casts import INTERPRETED, round_to, to_fp32

__all__ = ["rms_norm_fwd_kernel", "rms_norm_bwd_kernel", "forward", "backward", "launch_settings",
           "forward_rows_per_program", "backward_grid", "backward_max_rows", "vector_elements", "KERNELS",
           "max_backward_programs", "on_device", "quiet", "INTERPRETED", "to_fp32", "round_to"]


@triton.jit
def rms_norm_fwd_kernel(
    X_ptr,  # input rows, [n_rows, n_cols], last dim contiguous
    W_ptr,  # weight [n_cols] (ignored when HAS_WEIGHT is False)
    Y_ptr,  # output rows, [n_rows, n_cols], contiguous
    X_row_stride,  # elements between consecutive input rows
    Y_row_stride,  # elements between consecutive output rows
    n_rows,  # number of rows
    n_cols,  # row width
    eps,  # added to the mean square
    HAS_WEIGHT: tl.constexpr,  # multiply by W
    ROWS_PER_PROGRAM: tl.constexpr,  # rows of the tile each program normalizes (a power of two)
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
    VEC: tl.constexpr,  # elements per 16-byte vector when the launch is 16-byte aligned (see launch.py), else 1
):
    """y = x * rstd * w for a tile of rows; rstd = 1 / sqrt(mean(x^2) + eps) per row, all in fp32."""
    if VEC > 1:
        # what the launcher checked: every row starts and ends on a whole 16-byte vector. The hint needs an operation
        # to sit on (Triton ignores hints on kernel arguments themselves), hence the widening cast.
        X_row_stride = tl.multiple_of(X_row_stride.to(tl.int64), VEC)
        Y_row_stride = tl.multiple_of(Y_row_stride.to(tl.int64), VEC)
        n_cols = tl.multiple_of(n_cols.to(tl.int64), VEC)
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = to_fp32(tl.load(X_ptr + rows[:, None] * X_row_stride + cols[None, :], mask=mask, other=0.0))
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    y = x * rstd[:, None]
    if HAS_WEIGHT:
        # loaded in the tile's shape (each row of the tile reads it, from cache): the same vector accesses as x,
        # where a [BLOCK_SIZE] load would give each thread one element and then shuffle it through shared memory
        w = to_fp32(tl.load(W_ptr + rows[:, None] * 0 + cols[None, :], mask=col_mask[None, :], other=0.0))
        y = y * w
    tl.store(Y_ptr + rows[:, None] * Y_row_stride + cols[None, :], round_to(y, Y_ptr.dtype.element_ty), mask=mask)


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
    VEC: tl.constexpr,  # elements per 16-byte vector when the launch is 16-byte aligned (see launch.py), else 1
):
    """dx = rstd * (g - n * mean(g * n)) with n = x * rstd, g = dy * w; dw partial = sum of dy * n over own rows."""
    if VEC > 1:  # as in the forward: rows start and end on whole 16-byte vectors (the dw rows too, n_cols apart)
        DY_row_stride = tl.multiple_of(DY_row_stride.to(tl.int64), VEC)
        X_row_stride = tl.multiple_of(X_row_stride.to(tl.int64), VEC)
        DX_row_stride = tl.multiple_of(DX_row_stride.to(tl.int64), VEC)
        n_cols = tl.multiple_of(n_cols.to(tl.int64), VEC)
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dw_acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    # a constexpr trip count with a row mask: Triton 3.6's interpreter (the kit's floor, triton>=3.6) cannot loop
    # over runtime scalar bounds with numpy 2 (3.8's can), and power-of-two buckets keep the specializations few
    for i in range(0, ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        m = mask & (row < n_rows)
        # first read: the two row sums; evict_last keeps the row in cache for the second read
        x = to_fp32(tl.load(X_ptr + row * X_row_stride + cols, mask=m, other=0.0, eviction_policy="evict_last"))
        g = tl.load(DY_ptr + row * DY_row_stride + cols, mask=m, other=0.0, eviction_policy="evict_last")
        g = to_fp32(g)
        if HAS_WEIGHT:
            g = g * to_fp32(tl.load(W_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last"))
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        mean_gn = rstd * tl.sum(g * x, axis=0) / n_cols  # mean(g * n) with n = x * rstd
        # second read (the last use of the row: evict_first), so x, dy and w need not stay in registers meanwhile
        if HAS_WEIGHT:
            w = to_fp32(tl.load(W_ptr + cols, mask=mask, other=0.0))
        n = tl.load(X_ptr + row * X_row_stride + cols, mask=m, other=0.0, eviction_policy="evict_first")
        n = to_fp32(n) * rstd
        dy = tl.load(DY_ptr + row * DY_row_stride + cols, mask=m, other=0.0, eviction_policy="evict_first")
        dy = to_fp32(dy)
        dw_acc += dy * n
        if HAS_WEIGHT:
            g = dy * w
        else:
            g = dy
        dx = rstd * (g - n * mean_gn)
        tl.store(DX_ptr + row * DX_row_stride + cols, round_to(dx, DX_ptr.dtype.element_ty), mask=m)
    if HAS_WEIGHT:
        tl.store(DW_partial_ptr + pid * n_cols + cols, dw_acc, mask=mask)


def max_backward_programs(x: torch.Tensor) -> int:
    """How many programs a backward launch may use on x's device (the fused op's launcher uses it too)."""
    if x.is_cuda:
        return 4 * torch.cuda.get_device_properties(x.device).multi_processor_count
    return 4  # interpreter: programs run one after another; few of them is fastest


def on_device(t: torch.Tensor):
    """Triton launches on the *current* CUDA device: switch to the tensor's when it is another one (multi-GPU)."""
    if t.is_cuda and t.get_device() != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def quiet():
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
    block, num_warps = launch_settings(n_cols, "forward")
    rows_per_program = forward_rows_per_program(n_cols)
    w = x2d if weight is None else weight if weight.stride(0) == 1 else weight.contiguous()  # the kernel reads w[cols]
    vec = vector_elements(x2d.element_size(), n_cols, (x2d.stride(0), y.stride(0)),
                          (x2d.data_ptr(), y.data_ptr(), w.data_ptr()))
    with quiet(), on_device(x2d):
        rms_norm_fwd_kernel[(triton.cdiv(n_rows, rows_per_program),)](
            x2d, w, y, x2d.stride(0), y.stride(0), n_rows, n_cols, eps,
            HAS_WEIGHT=weight is not None, ROWS_PER_PROGRAM=rows_per_program, BLOCK_SIZE=block, VEC=vec,
            num_warps=num_warps,
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
    # fp32 at 16384 columns: one row per program (backward_max_rows), since a loop carrying dw spills registers on
    # sm_86/sm_89/sm_120; the fp32 partial-dw scratch then has one row per input row
    rows_per_program, programs = backward_grid(n_rows, max_backward_programs(x2d),
                                               backward_max_rows(n_cols, x2d.element_size()))
    has_w = weight is not None
    partial = torch.empty((programs if has_w else 1, n_cols), dtype=torch.float32, device=x2d.device)
    block, num_warps = launch_settings(n_cols, "backward")
    w = x2d if not has_w else weight if weight.stride(0) == 1 else weight.contiguous()
    vec = vector_elements(x2d.element_size(), n_cols, (dy2d.stride(0), x2d.stride(0), dx.stride(0)),
                          (dy2d.data_ptr(), x2d.data_ptr(), dx.data_ptr(), w.data_ptr(), partial.data_ptr()))
    with quiet(), on_device(x2d):
        rms_norm_bwd_kernel[(programs,)](
            dy2d, x2d, w, dx, partial,
            dy2d.stride(0), x2d.stride(0), dx.stride(0), n_rows, n_cols, eps,
            ROWS_PER_PROGRAM=rows_per_program, HAS_WEIGHT=has_w, BLOCK_SIZE=block, VEC=vec, num_warps=num_warps,
        )
    dw = partial.sum(0).to(weight.dtype) if has_w else None
    return dx, dw
