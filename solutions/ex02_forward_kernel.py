# ---
# jupyter:
#   fastpath:
#     exercise: ex02
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: fastpath,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 02 — the forward Triton kernel
#
# One program per row: load the row (masking the tail beyond `n_cols`), accumulate the mean square in fp32, scale
# by `rstd = 1 / sqrt(mean_sq + eps)` and the weight, store in the output's dtype. The check launches your kernel
# with a grid of `(n_rows,)` and `BLOCK_SIZE = next_power_of_2(n_cols)` on irregular shapes (7x33 row slice,
# 3x781 bf16, 1x1, every other row, tiny values), writes into an output inside a poisoned buffer, and compares with
# the float64 reference. Under Triton's CPU interpreter this takes a few seconds.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
import torch
import fastpath_lib
fastpath_lib.use_interpreter()  # no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
import triton
import triton.language as tl


# %% [markdown]
# ## The spec (plain torch)
#
# ```python
# x = x_row.float(); rstd = 1 / torch.sqrt((x * x).mean() + eps)
# y_row = (x * rstd * w.float()).to(x_row.dtype)      # without a weight: (x * rstd).to(...)
# ```
#
# ## Part 1: the forward kernel

# %%
@triton.jit
def my_rms_norm_fwd(
    X_ptr,  # input rows [n_rows, n_cols], last dim contiguous
    W_ptr,  # weight [n_cols] (ignore it when HAS_WEIGHT is False)
    Y_ptr,  # output rows [n_rows, n_cols]
    X_row_stride,  # elements between input rows
    Y_row_stride,  # elements between output rows
    n_cols,  # row width
    eps,  # added to the mean square
    HAS_WEIGHT: tl.constexpr,  # multiply by W
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
):
    # BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    y = x * rstd
    if HAS_WEIGHT:
        y = y * tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y_ptr + row * Y_row_stride + cols, y.to(Y_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


# %%
ex.check_forward_kernel(my_rms_norm_fwd)


# %% [markdown]
# ## Part 2 (stretch): the backward
#
# With `n = x * rstd` and `g = dy * w` (fp32): `dx = rstd * (g - n * mean(g * n))`, and `dw = sum over rows of
# dy * n`. Write a kernel with one program per row that stores `dx` and its row of an fp32 `dw_partial
# [n_rows, n_cols]` buffer, and a launcher `my_backward(dy2d, x2d, weight, eps) -> (dx, dw)` that sums the partial
# rows (`dw` is `None` without a weight).

# %%
@triton.jit
def my_rms_norm_bwd(DY_ptr, X_ptr, W_ptr, DX_ptr, DW_ptr, DY_row_stride, X_row_stride, n_cols, eps,
                    HAS_WEIGHT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    # BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY_ptr + row * DY_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    n = x * rstd
    g = dy
    if HAS_WEIGHT:
        g = dy * tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(DW_ptr + row * n_cols + cols, dy * n, mask=mask)
    dx = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
    tl.store(DX_ptr + row * n_cols + cols, dx.to(DX_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


def my_backward(dy2d, x2d, weight, eps):
    # BEGIN SOLUTION
    n_rows, n_cols = x2d.shape
    dy2d = dy2d.contiguous()
    dx = torch.empty((n_rows, n_cols), dtype=x2d.dtype, device=x2d.device)
    partial = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x2d.device)
    my_rms_norm_bwd[(n_rows,)](dy2d, x2d, weight if weight is not None else x2d, dx, partial, dy2d.stride(0),
                               x2d.stride(0), n_cols, eps, HAS_WEIGHT=weight is not None,
                               BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return dx, (partial.sum(0).to(weight.dtype) if weight is not None else None)
    # END SOLUTION


# %%
ex.check_backward_kernel(my_backward)

# %% [markdown]
# ## Questions
#
# 1. Which case fails when the store is not masked, and how does the check notice (there is no compute-sanitizer
#    on a CPU)?
# 2. Why is `row` cast to int64 before multiplying by the stride?
# 3. The kit's backward reduces `dw` over a fixed block of rows per program. What does that buy over atomics?
