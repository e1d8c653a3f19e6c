"""Triton kernels of fused residual-add + RMSNorm (one forward pass, one backward) and their launchers.

Forward, per row, everything in fp32 between one load and one store of each tensor::

    s   = x + r                        stored, rounded to x's dtype, as the new residual
    n   = s / sqrt(mean(s ** 2) + eps) the variance of the unrounded fp32 sum
    y   = ((n rounded to w's dtype) * w) rounded to w's dtype, then to x's dtype (n rounded to x's dtype without w)

The in-place form passes ``Y_ptr = X_ptr`` and ``S_ptr = R_ptr``: a program loads its whole tile of ``x`` and ``r``
before it stores anything, so a row may be overwritten by its own program. Another program's rows may not alias it
(the predicate's ``no_overlap`` condition sends such calls to the composite).

Backward (functional form), with ``s`` recomputed from ``x`` and ``r`` in fp32, ``n = s * rstd`` and ``g = dy * w``::

    ds = rstd * (g - n * mean(g * n)) + ds_new_residual     (= dx = dr)
    dw = sum over rows of (dy * n)                          (fixed-order partial sums, as RMSNorm's)

Launch settings (block, warps, rows per program, ``VEC``) follow RMSNorm's rule (:mod:`fastpath_lib.rmsnorm.launch`;
the backward keeps the forward's warps, :mod:`fastpath_lib.fused.launch`),
and the launches run as RMSNorm's do (on the tensor's device, numpy quiet under the interpreter).
Imports Triton: ``TRITON_INTERPRET`` must be set before this module is imported (the op imports it on first use).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fastpath_lib.fused.launch import launch_settings
from fastpath_lib.rmsnorm.kernels import (
    backward_grid,
    forward_rows_per_program,
    max_backward_programs,
    on_device,
    quiet,
    vector_elements,
)
from fastpath_lib.rmsnorm.layout import as_rows
from fastpath_lib.rmsnorm.limits import default_eps
from fastpath_lib.triton_casts import round_to, to_fp32

__all__ = ["fused_add_rms_norm_fwd_kernel", "fused_add_rms_norm_bwd_kernel", "forward", "backward", "run", "run_"]


@triton.jit
def fused_add_rms_norm_fwd_kernel(
    X_ptr,  # x rows, [n_rows, n_cols], last dim contiguous
    R_ptr,  # residual rows, [n_rows, n_cols], last dim contiguous
    W_ptr,  # weight [n_cols] (ignored when HAS_WEIGHT is False)
    Y_ptr,  # output rows (X_ptr in the in-place form)
    S_ptr,  # new residual rows (R_ptr in the in-place form)
    X_row_stride,  # elements between rows of X
    R_row_stride,  # elements between rows of R
    Y_row_stride,  # elements between rows of Y
    S_row_stride,  # elements between rows of S
    n_rows,  # number of rows
    n_cols,  # row width
    eps,  # added to the mean square
    HAS_WEIGHT: tl.constexpr,  # multiply by W
    ROWS_PER_PROGRAM: tl.constexpr,  # rows of the tile each program handles (a power of two)
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
    VEC: tl.constexpr,  # elements per 16-byte vector when the launch is 16-byte aligned, else 1
):
    """s = x + r (stored), y = round(round(s * rstd) * w) for a tile of rows; rstd from the fp32 s."""
    if VEC > 1:  # every row starts and ends on a whole 16-byte vector (checked by the launcher)
        X_row_stride = tl.multiple_of(X_row_stride.to(tl.int64), VEC)
        R_row_stride = tl.multiple_of(R_row_stride.to(tl.int64), VEC)
        Y_row_stride = tl.multiple_of(Y_row_stride.to(tl.int64), VEC)
        S_row_stride = tl.multiple_of(S_row_stride.to(tl.int64), VEC)
        n_cols = tl.multiple_of(n_cols.to(tl.int64), VEC)
    rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
    cols = tl.arange(0, BLOCK_SIZE)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = to_fp32(tl.load(X_ptr + rows[:, None] * X_row_stride + cols[None, :], mask=mask, other=0.0))
    r = to_fp32(tl.load(R_ptr + rows[:, None] * R_row_stride + cols[None, :], mask=mask, other=0.0))
    s = x + r
    tl.store(S_ptr + rows[:, None] * S_row_stride + cols[None, :], round_to(s, S_ptr.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=1) / n_cols + eps)
    n = s * rstd[:, None]
    if HAS_WEIGHT:
        w = tl.load(W_ptr + rows[:, None] * 0 + cols[None, :], mask=col_mask[None, :], other=0.0)
        wty = W_ptr.dtype.element_ty
        n = to_fp32(round_to(to_fp32(round_to(n, wty)) * to_fp32(w), wty))
    tl.store(Y_ptr + rows[:, None] * Y_row_stride + cols[None, :], round_to(n, Y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def fused_add_rms_norm_bwd_kernel(
    DY_ptr,  # gradient of the output, [n_rows, n_cols], contiguous
    DS_ptr,  # gradient of the new residual, [n_rows, n_cols], contiguous (ignored when HAS_DS is False)
    X_ptr,  # forward x rows, last dim contiguous
    R_ptr,  # forward residual rows, last dim contiguous
    W_ptr,  # weight [n_cols] (ignored when HAS_WEIGHT is False)
    DX_ptr,  # gradient of x (and of the residual), [n_rows, n_cols], contiguous
    DW_partial_ptr,  # fp32 [n_programs, n_cols]: this program's share of dw
    X_row_stride,  # elements between rows of X
    R_row_stride,  # elements between rows of R
    n_rows,  # number of rows
    n_cols,  # row width
    eps,  # added to the mean square
    ROWS_PER_PROGRAM: tl.constexpr,  # contiguous block of rows each program owns
    HAS_WEIGHT: tl.constexpr,  # multiply by W, and produce dw
    HAS_DS: tl.constexpr,  # a gradient flows into the new residual
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
):
    """ds = rstd * (g - n * mean(g * n)) + ds_new with s = x + r recomputed in fp32; dw partial = sum dy * n."""
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dw_acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    if HAS_WEIGHT:
        w = to_fp32(tl.load(W_ptr + cols, mask=mask, other=0.0))
    for i in range(0, ROWS_PER_PROGRAM):
        row = pid * ROWS_PER_PROGRAM + i
        m = mask & (row < n_rows)
        s = to_fp32(tl.load(X_ptr + row * X_row_stride + cols, mask=m, other=0.0))
        s += to_fp32(tl.load(R_ptr + row * R_row_stride + cols, mask=m, other=0.0))
        dy = to_fp32(tl.load(DY_ptr + row * n_cols + cols, mask=m, other=0.0))
        rstd = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n_cols + eps)
        n = s * rstd
        if HAS_WEIGHT:
            g = dy * w
        else:
            g = dy
        ds = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
        if HAS_DS:
            ds += to_fp32(tl.load(DS_ptr + row * n_cols + cols, mask=m, other=0.0))
        dw_acc += dy * n
        tl.store(DX_ptr + row * n_cols + cols, round_to(ds, DX_ptr.dtype.element_ty), mask=m)
    if HAS_WEIGHT:
        tl.store(DW_partial_ptr + pid * n_cols + cols, dw_acc, mask=mask)


def forward(x2d: torch.Tensor, r2d: torch.Tensor, weight: torch.Tensor | None, eps: float, *,
            out: torch.Tensor | None = None,
            new_residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the forward on ``[n_rows, n_cols]`` views; returns ``(out, new_residual)``.

    New contiguous tensors of x's dtype unless ``out`` / ``new_residual`` are given: the in-place form passes
    ``out=x2d, new_residual=r2d``; the guard-band tests pass views inside poisoned buffers.
    """
    n_rows, n_cols = x2d.shape
    y = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device) if out is None else out
    s = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device) if new_residual is None else new_residual
    block, num_warps = launch_settings(n_cols, "forward")
    rows_per_program = forward_rows_per_program(n_cols)
    w = x2d if weight is None else weight if weight.stride(0) == 1 else weight.contiguous()
    vec = vector_elements(x2d.element_size(), n_cols, (x2d.stride(0), r2d.stride(0), y.stride(0), s.stride(0)),
                          (x2d.data_ptr(), r2d.data_ptr(), y.data_ptr(), s.data_ptr(), w.data_ptr()))
    with quiet(), on_device(x2d):
        fused_add_rms_norm_fwd_kernel[(triton.cdiv(n_rows, rows_per_program),)](
            x2d, r2d, w, y, s, x2d.stride(0), r2d.stride(0), y.stride(0), s.stride(0), n_rows, n_cols, eps,
            HAS_WEIGHT=weight is not None, ROWS_PER_PROGRAM=rows_per_program, BLOCK_SIZE=block, VEC=vec,
            num_warps=num_warps,
        )
    return y, s


def backward(dy2d: torch.Tensor, ds2d: torch.Tensor | None, x2d: torch.Tensor, r2d: torch.Tensor,
             weight: torch.Tensor | None, eps: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Launch the backward; returns ``(dx, dw)``: dx (also the residual's gradient) of x's dtype, dw of the weight's
    dtype or ``None``. ``dy2d`` and ``ds2d`` are made contiguous here."""
    n_rows, n_cols = x2d.shape
    dy2d = dy2d.contiguous()
    ds2d = ds2d.contiguous() if ds2d is not None else None
    dx = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device)
    rows_per_program, programs = backward_grid(n_rows, max_backward_programs(x2d))
    has_w = weight is not None
    partial = torch.empty((programs if has_w else 1, n_cols), dtype=torch.float32, device=x2d.device)
    block, num_warps = launch_settings(n_cols, "backward")
    w = x2d if not has_w else weight if weight.stride(0) == 1 else weight.contiguous()
    with quiet(), on_device(x2d):
        fused_add_rms_norm_bwd_kernel[(programs,)](
            dy2d, dy2d if ds2d is None else ds2d, x2d, r2d, w, dx, partial, x2d.stride(0), r2d.stride(0), n_rows,
            n_cols, eps, ROWS_PER_PROGRAM=rows_per_program, HAS_WEIGHT=has_w, HAS_DS=ds2d is not None,
            BLOCK_SIZE=block, num_warps=num_warps,
        )
    return dx, (partial.sum(0).to(weight.dtype) if has_w else None)


def _eps(x: torch.Tensor, eps: float | None) -> float:
    return default_eps(x.dtype) if eps is None else float(eps)


def run(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
        eps: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The functional Triton route on an eligible call (no checks): new contiguous ``(out, new_residual)``."""
    y, s = forward(as_rows(x), as_rows(residual), weight, _eps(x, eps))
    return y.view(x.shape), s.view(x.shape)


def run_(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None) -> None:
    """The in-place Triton route on an eligible call (no checks, no overlap): writes into ``x`` and ``residual``."""
    x2, r2 = as_rows(x), as_rows(residual)
    forward(x2, r2, weight, _eps(x, eps), out=x2, new_residual=r2)
