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
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 02 — a fused residual-add RMSNorm kernel
#
# Lesson 02 built the kit's forward kernel. In a transformer block RMSNorm usually comes right after a residual add, and
# fast implementations fuse the two (vLLM's `fused_add_rms_norm`, for inference): one pass reads `x` and the residual
# `r` and writes their sum `h` (the next residual stream) and the normalized `y`; the kernel here also saves each row's
# `rstd` for a backward. The kit's own
# fused op (`fastpath_lib.fused`, lesson 08) is not this kernel: it follows vLLM's contract and normalizes the unrounded
# fp32 sum. This one follows the spec below; you write it. The check launches it with a grid of `(n_rows,)` and
# `BLOCK_SIZE = next_power_of_2(n_cols)` on irregular shapes (7x33 row slice, 3x781 bf16, 1x1, every other row, tiny
# values, a residual that is itself a row slice, and a shape drawn at each run), writes every output inside a poisoned
# buffer, and compares with the plain-torch spec below. Under Triton's CPU interpreter this takes a few seconds. The
# grader also reads your source: what it launches must be your own `@triton.jit` function, whose body uses
# `triton.language` and the few Python builtins the grader accepts (`range`, `min`, `max`, ...: listed below) only.
#
# **Your kernel in the grader.** The grader compiles every kernel your code launches with Triton's compiler for a GPU
# (sm_80) before it runs any of them under the interpreter, and a part fails when that step refuses one ([a kernel in
# the grader](../docs/reference.md#a-kernel-in-the-grader-exercises-02-and-08) lists what its body may call and read,
# what it may be launched with and how it is defined, for exercises 02 and 08 alike). The part fails too on a
# comprehension's `if` (the compiler ignores it), a generator expression, an attribute no value of `triton.language`
# publishes (`x.dtype`, `x.shape` and `x.to` are published; `x.handle` is not: Triton sets it on every value, but it
# holds the compiler's IR object, not the language's) and, in this notebook too where the interpreter runs your
# kernel, a data race: a byte one program of a launch writes and another program of that launch reads or writes, not
# both with atomics and with no atomic ordering the two (the first program releasing a word after its access and the
# second acquiring that word before its own, as a lock taken with `tl.atomic_cas` and released with `tl.atomic_xchg`
# does, or a counter every program bumps with `tl.atomic_add`; Triton's atomics acquire and release by default,
# `sem="acq_rel"`, and one with `sem="relaxed"` or `scope="cta"` orders nothing). Accumulate with `tl.atomic_add`, or
# let each program write a partial row of its own and sum the rows afterwards, as the backward's `DW` partial buffer
# does. Since the grader compiles and runs your `@triton.jit` function itself, a kernel is defined under `@triton.jit`
# alone (not under `@triton.autotune` or `@triton.heuristics`): choose `BLOCK_SIZE` and `num_warps` in the launcher.
# The check in this notebook runs your kernel directly, without that compile step (what the compiler alone refuses,
# a comprehension's `if` among it, is the grader's to find), and reads your source with the generator-expression,
# attribute and `@triton.jit` rules and the `int32` rule below, on a GPU too: `python -m fastpath_lib grade` gives the
# grader's verdict.
#
# **Compute it yourself.** No cell may call what already is the answer, and a part whose code calls it fails: any
# operator of torch's *normalization* family (every operator that returns its input rescaled by a statistic of itself,
# under every name the installed torch has: `F.rms_norm`, `F.layer_norm`, `torch.nn.RMSNorm`, ...), the kit's
# operator (`fastpath_lib.rmsnorm.op`, `fastpath_lib.rmsnorm.module`), its kernels (`fastpath_lib.rmsnorm.kernels`) or
# its reference (`fastpath_lib.testing`'s `reference_rms_norm`, `reference_grads` and `_ref_graph`): the check
# compares your kernel with the spec, so a call to one of them would be graded against itself.
#
# **What this check cannot grade.** The grader runs your kernel in Triton's CPU interpreter, on small shapes: it
# grades the values, the masks, the memory your kernel reads and writes (the memory rule, printed below the spec) and
# data races between its programs (above), not timing, occupancy or register spills (lesson 02, "What the interpreter
# cannot show", names the tool for each). It does grade `int32` offset overflow past
# 2³¹ elements without allocating them: one launch says a row stride that puts row 3 at 2³² + 8 elements, on tensors
# that hold only row 0; a `row * row_stride` computed in int32 wraps (the interpreter wraps as a GPU does) and lands
# back inside them; the backward's launcher runs twice more on 3 rows of 16 columns, its launch's last program run
# once as row 2²⁸ + 3 and once as row 2²⁸ + 2 (past 2³¹ elements), where an int32 row offset wraps back to row 3, past
# the tensors, and to row 2, inside them: the check compares what the two runs touched. Compute row offsets in int64
# (`tl.program_id(0).to(tl.int64)`). Those launches move one program per row on axis 0, so the source of your kernels
# is read too, whatever their grid, guards and rows per program: it refuses a program id (`tl.program_id`, any axis)
# multiplied in int32 by a value known only at run time (a stride, a row count, a width not passed as `tl.constexpr`).
# Convert the program id first (`tl.program_id(1).to(tl.int64)`) or where it is multiplied (`row.to(tl.int64) *
# stride`); a product with a `tl.constexpr` (`tl.program_id(1) * BLOCK_SIZE`, a column tile) stays int32. On a CPU the
# check in this notebook does the same, but the compile step; on a GPU it runs the compiled kernel, checks its values
# (and that it writes nothing outside its outputs and leaves its inputs as they were) and reads your source, and the
# memory rule, data races and the overflow launches are checked by `python -m fastpath_lib grade`.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or why not (a table of *yours vs
# expected* where values are wrong, else the rule your code breaks). `python -m fastpath_lib grade exercises/` runs all
# notebooks in a fresh kernel and prints your score; the solved versions are in `solutions/`.

# %%
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
import triton
import triton.language as tl


# %% [markdown]
# ## The spec (plain torch, one row)
#
# ```python
# h = x_row + r_row                                # input dtype: store it to H
# hf = h.float()
# rstd = 1 / torch.sqrt((hf * hf).mean() + eps)    # fp32: store it to RSTD[row]
# y_row = (hf * rstd * w.float()).to(x_row.dtype)  # store it to Y
# ```
#
# This spec normalizes the *rounded* `h`, the value the next layer reads, so it rounds where the eager pair
# `F.rms_norm(x + r, ...)` rounds: its `h` is `x + r` bit for bit, and its `y` differs from the pair's only through
# the last bits of the fp32 `rstd` (`1 / sqrt` here, `rsqrt` and another summation order there). In fp16 and bf16
# that moves a rare element by one rounding step (at most 1 in 10,000); in fp32 it moves about one element in ten,
# each by less than 4 fp32 epsilons relative. vLLM's contract normalizes the unrounded fp32 sum instead, and
# lesson 08 measures how many outputs the two differ on. Both are honest contracts; a kernel states which one it
# matches, and here the check holds you to this one.
#
# The check also counts every load and store of one call (Triton's interpreter, `fastpath_lib.traffic`; on a GPU,
# `python -m fastpath_lib grade` does) and holds the kernel to the memory rule that the next cell prints from the
# check. A kernel with every value right that
# breaks it fails: the rounded `h` that `y` normalizes is the value already in registers (`h.to(tl.float32)`), not
# a load of `H` after storing it.

# %%
print("\n".join(f"- {clause}" for clause in ex.MEMORY_RULE))

# %% [markdown]
# ## Part 1: the fused kernel

# %%
@triton.jit
def my_add_rms_norm_fwd(
    X_ptr,  # input rows [n_rows, n_cols], last dim contiguous
    R_ptr,  # residual rows [n_rows, n_cols], last dim contiguous
    W_ptr,  # weight [n_cols]
    H_ptr,  # out: h = x + r, in the input dtype
    Y_ptr,  # out: rms_norm(h) * w, in the input dtype
    RSTD_ptr,  # out: fp32 [n_rows], 1 / sqrt(mean(h^2) + eps) of each row
    X_row_stride,  # elements between input rows
    R_row_stride,  # elements between residual rows
    H_row_stride,  # elements between rows of H
    Y_row_stride,  # elements between rows of Y
    n_cols,  # row width
    eps,  # added to the mean square
    BLOCK_SIZE: tl.constexpr,  # power of two >= n_cols
):
    """One program per row: writes the row of H and of Y and its RSTD (a kernel returns nothing)."""
    # BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(R_ptr + row * R_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(H_ptr.dtype.element_ty)
    tl.store(H_ptr + row * H_row_stride + cols, h, mask=mask)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
    tl.store(RSTD_ptr + row, rstd)
    w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y_ptr + row * Y_row_stride + cols, (hf * rstd * w).to(Y_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_add_rms_norm_kernel(my_add_rms_norm_fwd)


# %% [markdown]
# ## Part 2 (stretch): the backward, from the saved rstd
#
# The backward of `y = h * rstd * w` with `n = h * rstd` and `g = dy * w` (fp32) is
# `dh = rstd * (g - n * mean(g * n))`, and `dw = sum over rows of dy * n`. A training step saved `rstd` in the
# forward, so the backward gets it instead of `eps`: write `my_backward(dy2d, h2d, weight, rstd) -> (dh, dw)` with
# a kernel of one program per row that stores `dh` and its row of an fp32 `dw_partial [n_rows, n_cols]` buffer
# (`dw` is `None` without a weight). The check computes `rstd` with an eps that is not the default, so recomputing
# it gives the wrong gradients. `my_backward` only allocates, launches and sums the partial `dw` rows: the
# gradients are computed in your kernel, not with torch arithmetic around it. The grader runs `my_backward` on tensors
# that hold no values (`device="meta"`, with your inputs' shapes, dtypes and strides) and replays what it allocated,
# copied, viewed, launched and summed on the real inputs: it may read shapes, dtypes and strides, allocate, copy
# (`.contiguous()`, `.to(dtype)`), make views, launch kernels and sum the partial `dw` rows, but not read values
# (`.item()`, `.tolist()`, `.numpy()`, memory through `data_ptr()`) or branch on the device (there a tensor's `.device`
# is `meta`, its `.is_cuda` is `False` and its `.data_ptr()` is the view's byte offset from address 0).

# %%
@triton.jit
def my_rms_norm_bwd(DY_ptr, H_ptr, W_ptr, RSTD_ptr, DH_ptr, DW_ptr, DY_row_stride, H_row_stride,
                    n_cols, HAS_WEIGHT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """One program per row: writes the row of DH and, with a weight, its row of the fp32 DW partial buffer."""
    # BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    h = tl.load(H_ptr + row * H_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY_ptr + row * DY_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(RSTD_ptr + row)
    n = h * rstd
    g = dy
    if HAS_WEIGHT:
        g = dy * tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(DW_ptr + row * n_cols + cols, dy * n, mask=mask)
    dh = rstd * (g - n * (tl.sum(g * n, axis=0) / n_cols))
    tl.store(DH_ptr + row * n_cols + cols, dh.to(DH_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


def my_backward(dy2d, h2d, weight, rstd):
    """Return `(dh, dw)`: `dh` in `h2d`'s dtype and shape, `dw` in the weight's dtype (`None` without a weight)."""
    # BEGIN SOLUTION
    n_rows, n_cols = h2d.shape
    dy2d = dy2d.contiguous()
    dh = torch.empty((n_rows, n_cols), dtype=h2d.dtype, device=h2d.device)
    partial = torch.empty((n_rows, n_cols), dtype=torch.float32, device=h2d.device)
    my_rms_norm_bwd[(n_rows,)](dy2d, h2d, weight if weight is not None else h2d, rstd, dh, partial, dy2d.stride(0),
                               h2d.stride(0), n_cols, HAS_WEIGHT=weight is not None,
                               BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return dh, (partial.sum(0).to(weight.dtype) if weight is not None else None)
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_backward_with_saved_rstd(my_backward)

# %% [markdown]
# ## Questions
#
# 1. Which case fails when the stores are not masked, and how does the check notice (there is no compute-sanitizer
#    on a CPU)?
# 2. Why is `row` cast to int64 before multiplying by the stride?
# 3. The fused kernel reads `x` and `r` once and writes `h` and `y` once. How many bytes per element does it move,
#    and how many would an unfused `h = x + r` followed by the kit's RMSNorm move?
# 4. Why does the backward take the saved `rstd` rather than recomputing it from `h` and `eps`?
