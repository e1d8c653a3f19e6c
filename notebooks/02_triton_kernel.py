# ---
# jupyter:
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
# # 02 · The Triton kernels: forward, then backward
#
# **What you will learn**
# - why a fused RMSNorm is faster than the composite version: the bytes each one moves;
# - the forward kernel, line by line, and its launcher (block size, warps, one program per row);
# - the backward kernel (`dx`, and a deterministic `dw` reduction);
# - how to test a kernel on a deliberately irregular shape against the float64 reference;
# - how a benchmark turns time into GB/s from bytes moved — and why interpreter timings are not performance.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
fastpath_lib.use_interpreter()  # no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
from fastpath_lib import runtime

print(runtime.describe())
DEVICE = "cuda" if runtime.cuda_available() and not runtime.interpreter_enabled() else "cpu"
print("running on", "a GPU (CUDA): kernels are compiled and timings are real" if DEVICE == "cuda" else
      "the CPU: Triton kernels run in the interpreter (correct but slow; no timing here is a GPU measurement)")
_ = torch.manual_seed(0)

import inspect
from fastpath_lib.rmsnorm import kernels  # after use_interpreter(): Triton reads TRITON_INTERPRET here
from fastpath_lib.testing import compare, reference_grads, reference_rms_norm


# %% [markdown]
# ## Motivation: the composite version and the bytes it moves
#
# RMSNorm is memory-bound: a handful of flops per element, so its speed is set by the bytes it moves. Written as
# separate eager operations, every intermediate is written to memory and read back. The cell below is an
# **illustration** (not the library's code) annotated with the traffic of each op, for `N = rows × cols`
# elements, `R = rows`, `C = cols`:

# %%
# ILLUSTRATION ONLY: RMSNorm as separate eager ops, the way a composite implementation runs it
def composite_rms_norm(x, w, eps):
    sq = x * x                          # read N,     write N
    ms = sq.mean(-1, keepdim=True)      # read N,     write R
    rstd = torch.rsqrt(ms + eps)        # read R (x2), write R (x2)
    n = x * rstd                        # read N + R, write N
    return n * w                        # read N + C, write N

x, w = torch.randn(37, 181), torch.randn(181)
print("composite matches the reference:", compare(composite_rms_norm(x, w, 1e-6),
                                                  reference_rms_norm(x, [181], w, 1e-6), x.dtype) is None)


# %% [markdown]
# The fused kernel reads each row once, keeps it in registers while it computes the mean square, and writes the
# output once: read `N + C`, write `N`. A small formula makes the difference concrete (bytes, not time):

# %%
def bytes_composite(rows, cols, elem):
    n, r, c = rows * cols, rows, cols
    return elem * ((n + n) + (n + r) + 4 * r + (n + r + n) + (n + c + n))

def bytes_fused(rows, cols, elem):
    return elem * (rows * cols + cols + rows * cols)

for rows, cols, dtype in ((4096, 4096, torch.bfloat16), (8192, 8192, torch.float16), (1823, 781, torch.float32)):
    elem = torch.empty((), dtype=dtype).element_size()
    bc, bf = bytes_composite(rows, cols, elem), bytes_fused(rows, cols, elem)
    print(f"{rows}x{cols} {str(dtype)[6:]:9} composite {bc / 2**20:8.1f} MiB  fused {bf / 2**20:7.1f} MiB  "
          f"ratio {bc / bf:.2f}")

# %% [markdown]
# The fused version moves 3.5 times fewer bytes in forward. On a memory-bound op that is the upper bound of the
# speed-up; whether a GPU gets close is a measurement (lesson 05), not something this formula can tell.
# (`F.rms_norm` itself has fused ATen kernels on recent torch versions — which is exactly why the benchmark must
# compare against the real baseline, not against the composite.)
#
# ## The forward kernel
#
# Its source (printed from the library; output ignored by the notebook tests):

# %% tags=["nbval-ignore-output"]
print(inspect.getsource(kernels.rms_norm_fwd_kernel.fn))

# %% [markdown]
# Line by line:
#
# - `row = tl.program_id(0).to(tl.int64)` — one program per row; `int64` so `row * X_row_stride` cannot overflow
#   for tensors over 2³¹ elements.
# - `cols = tl.arange(0, BLOCK_SIZE)`, `mask = cols < n_cols` — `BLOCK_SIZE` is a power of two (Triton's
#   `arange` needs one) at least `n_cols`; the mask switches off the lanes past the row's end.
# - `tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=0.0).to(tl.float32)` — the row, upcast to fp32;
#   masked lanes read as 0, so they add nothing to the sum. The row stride is an argument, so row slices of a
#   wider buffer need no copy.
# - `mean_sq = tl.sum(x * x, axis=0) / n_cols` — divide by the true width, not by `BLOCK_SIZE`.
# - `rstd = 1.0 / tl.sqrt(mean_sq + eps)`, `y = x * rstd`, `y = y * w` — in fp32; the weight is loaded once per
#   program (it is tiny and stays in cache across programs).
# - `tl.store(..., y.to(Y_ptr.dtype.element_ty), mask=mask)` — round once to the output dtype, as `F.rms_norm`
#   does, and write only the valid lanes.
#
# ## The launcher
#
# The launcher allocates the output, picks `BLOCK_SIZE` and `num_warps`, and launches one program per row:

# %% tags=["nbval-ignore-output"]
print(inspect.getsource(kernels.launch_settings))
print(inspect.getsource(kernels.forward))

# %% [markdown]
# Block size and warps for a few widths (wider rows get more warps so each thread holds fewer elements):

# %%
for n_cols in (1, 16, 181, 781, 4096, 16384):
    block, warps = kernels.launch_settings(n_cols)
    print(f"n_cols={n_cols:6}  BLOCK_SIZE={block:6}  num_warps={warps:2}  idle lanes {block - n_cols}")

# %% [markdown]
# ## Test on an irregular shape
#
# Irregular shapes catch off-by-one masks and stride bugs that 1024×1024 hides. The kernel runs on any width up to
# `MAX_COLS`; 37×181 is an odd number of rows and a width that is neither a power of two nor 16-byte aligned in
# fp32. We call the launcher directly and compare with the float64 reference in three dtypes:

# %%
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x = (2 * torch.randn(37, 181, device=DEVICE)).to(dtype)
    w = (1 + torch.randn(181, device=DEVICE) / 2).to(dtype)
    y = kernels.forward(x, w, 1e-6)
    print(f"{str(dtype):15} forward 37x181: mismatch = {compare(y, reference_rms_norm(x, [181], w, 1e-6), dtype)}")

# %% [markdown]
# Dispatch (`fastpath_lib.rms_norm`) would *not* send this fp32 call to Triton: its row stride of 724 bytes is not
# a multiple of 16, so vector loads cannot be used and the kernel would be slower, not wrong. The predicate
# protects speed here, not correctness (lesson 03):

# %%
x = torch.randn(37, 181, device=DEVICE)
print(fastpath_lib.explain(x, [181], torch.ones(181, device=DEVICE)).failed)

# %% [markdown]
# ## The backward kernel
#
# With `n = x * rstd` and `g = dy * w`, the gradients are `dx = rstd * (g - n * mean(g * n))` and
# `dw = Σ_rows dy * n`. The source:

# %% tags=["nbval-ignore-output"]
print(inspect.getsource(kernels.rms_norm_bwd_kernel.fn))

# %% [markdown]
# Line by line:
#
# - each program owns a contiguous block of `ROWS_PER_PROGRAM` rows (a constexpr power of two; the row mask
#   `row < n_rows` switches off the rows past the end) and loads the weight once for all of them;
# - per row it recomputes `rstd` from `x` (cheaper than saving it from the forward: one fewer tensor to store and
#   read), then `n`, `g`, and `dx` with the row mean of `g * n`;
# - it accumulates `dy * n` into `dw_acc` in fp32 registers, and writes it once into *its own* row of an fp32
#   partial buffer;
# - the launcher sums the partial rows with `torch.sum` in a fixed order: no atomics, so the same input gives
#   the same bits every run (deterministic-algorithms mode keeps the fast path).

# %%
x = (2 * torch.randn(37, 181, device=DEVICE))
w = 1 + torch.randn(181, device=DEVICE) / 2
dy = torch.randn(37, 181, device=DEVICE)
dx, dw = kernels.backward(dy, x, w, 1e-6)
ref_dx, ref_dw = reference_grads(x, [181], w, 1e-6, dy)
print("dx mismatch:", compare(dx, ref_dx, x.dtype, grad=True))
print("dw mismatch:", compare(dw, ref_dw, w.dtype, grad=True))
dx2, dw2 = kernels.backward(dy, x, w, 1e-6)
print("bitwise identical on a second run:", torch.equal(dx, dx2) and torch.equal(dw, dw2))

# %% [markdown]
# The backward's traffic: read `x`, `dy` (`2N`) and `w`, write `dx` (`N`) and the fp32 partials
# (`programs × C`, summed afterwards). The composite backward through autograd reads and writes several
# intermediates more.
#
# ## Benchmark: GB/s from bytes moved
#
# Throughput is `bytes_fused / time`, compared with the device's memory bandwidth. On a GPU the cell below measures
# with `triton.testing.do_bench` (warm-up, many repetitions, median); without a GPU it measures **nothing** —
# the interpreter runs programs one by one in numpy, and its timings say nothing about a GPU.

# %% tags=["nbval-ignore-output"]
if DEVICE == "cuda":
    import triton

    rows, cols = 4096, 4096
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    ms = triton.testing.do_bench(lambda: kernels.forward(x, w, 1e-6))
    print(f"forward {rows}x{cols} bf16: {ms * 1e3:.1f} us, {bytes_fused(rows, cols, 2) / ms / 1e6:.0f} GB/s")
else:
    print("No GPU here: nothing measured. Interpreter timings are not GPU measurements; see lesson 05 for "
          "recorded GPU results.")

# %% [markdown]
# ## What the numbers say
#
# - The formula bounds the gain: fused moves 3.5× fewer bytes than the composite, but the real baseline
#   (`F.rms_norm`) may already be fused, so the honest comparison is against it, measured.
# - A kernel near the device's bandwidth has no headroom left; one far below it is limited by something else
#   (launch overhead on small shapes, too few rows to fill the GPU, misaligned loads).
# - Small calls are launch-bound: that is why the predicate has a row threshold.
#
# ## Recap
#
# - One program per row, fp32 accumulation, one rounding at the store; the mask handles any width.
# - The backward recomputes `rstd` and reduces `dw` deterministically through per-program partials.
# - Test on irregular shapes against the float64 reference; report GB/s from bytes moved, measured on a GPU only.
#
# **Questions**
# 1. Why divide by `n_cols` and not by `BLOCK_SIZE` in the mean square?
# 2. What goes wrong if `row` stays `int32` for a 70 000 × 32 768 input?
# 3. Why does the backward write per-program partials instead of using `tl.atomic_add` on `dw`?
# 4. Why can't the byte formula predict the speed-up over `F.rms_norm`?
