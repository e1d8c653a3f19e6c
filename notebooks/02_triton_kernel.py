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
# **What you will do**: read the forward and backward kernels line by line, test them on an irregular shape, read the
# code compiled for a GPU on this machine, and count the bytes they move.
#
# **What you need**: lessons 00 and 01, and Triton's programming model (a program per tile, `tl.load`, masks); this
# CPU.
#
# **Time**: about 40 minutes.
#
# **What you will learn**
# - why a fused RMSNorm can be faster than the composite version: the bytes each one moves;
# - the forward kernel, line by line, and its launcher (block size, warps, rows per program);
# - the backward kernel (`dx`, and a deterministic `dw` reduction);
# - how to test a kernel on a deliberately irregular shape against the float64 reference;
# - what alignment changes in the code compiled for a GPU (vector width, registers, spills), read on this machine;
# - the traffic counted by Triton's interpreter beside the bytes model: requested (logical) against distinct bytes;
# - how a benchmark turns time into GB/s from bytes moved — and why interpreter timings are not performance.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import runtime

DEVICE = runtime.lesson_device()  # "cuda" on a GPU, else "cpu"; prints the mode and versions
_ = torch.manual_seed(0)

import inspect
import pandas as pd
# after use_interpreter(): Triton reads TRITON_INTERPRET here
from fastpath_lib.rmsnorm import kernels
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
print("composite matches the reference:",
      compare(composite_rms_norm(x, w, 1e-6), reference_rms_norm(x, [181], w, 1e-6),
              x.dtype) is None)


# %% [markdown]
# The fused kernel reads each row once, keeps it in registers while it computes the mean square, and writes the
# output once: read `N + C`, write `N`. A small formula makes the difference concrete (bytes, not time):

# %%
def bytes_composite(rows, cols, elem):
    n, r, c = rows * cols, rows, cols
    return elem * ((n + n) + (n + r) + 4 * r + (n + r + n) + (n + c + n))

def bytes_fused(rows, cols, elem):
    return elem * (rows * cols + cols + rows * cols)

for rows, cols, dtype in ((4096, 4096, torch.bfloat16), (8192, 8192, torch.float16),
                          (1823, 781, torch.float32)):
    elem = torch.empty((), dtype=dtype).element_size()
    bc, bf = bytes_composite(rows, cols, elem), bytes_fused(rows, cols, elem)
    print(f"{rows}x{cols} {str(dtype)[6:]:9} composite {bc / 2**20:8.1f} MiB  "
          f"fused {bf / 2**20:7.1f} MiB  ratio {bc / bf:.2f}")

# %% [markdown]
# The fused version moves 3.5 times fewer bytes in forward. On a memory-bound op that is the upper bound of the
# speed-up; whether a GPU gets close is a measurement (lesson 05), not something this formula can tell.
# (`F.rms_norm` itself may run a fused kernel on a GPU: this torch declares one, `aten::_fused_rms_norm`. That is
# exactly why the benchmark must compare against the real baseline, not against the composite.)
#
# ## The forward kernel
#
# Its source (printed from the library; output ignored by the notebook tests):

# %% tags=["nbval-ignore-output"]
print(inspect.getsource(kernels.rms_norm_fwd_kernel.fn))

# %% [markdown]
# Line by line:
#
# - `rows = tl.program_id(0).to(tl.int64) * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)` — each program
#   normalizes a tile of `ROWS_PER_PROGRAM` rows (one row when rows are wide, several when they are narrow);
#   `int64` so `rows * X_row_stride` cannot overflow for tensors over 2³¹ elements.
# - `cols = tl.arange(0, BLOCK_SIZE)`, `mask = (rows < n_rows)[:, None] & col_mask[None, :]` — `BLOCK_SIZE` is a
#   power of two (Triton's `arange` needs one) at least `n_cols`; the mask switches off the lanes past the row's
#   end and the rows past the last one.
# - `to_fp32(tl.load(X_ptr + rows[:, None] * X_row_stride + cols[None, :], mask=mask, other=0.0))` — the tile,
#   upcast to fp32; masked lanes read as 0, so they add nothing to the sum. The row stride is an argument, so row
#   slices of a wider buffer need no copy.
# - `mean_sq = tl.sum(x * x, axis=1) / n_cols` — one sum per row, divided by the true width, not by `BLOCK_SIZE`.
# - `rstd = 1.0 / tl.sqrt(mean_sq + eps)`, `y = x * rstd[:, None]`, `y = y * w` — in fp32; the weight is loaded
#   in the tile's shape, so it gets the same vector accesses as `x` (it is tiny and stays in cache).
# - `tl.store(..., round_to(y, Y_ptr.dtype.element_ty), mask=mask)` — round once to the output dtype, to nearest
#   even as `F.rms_norm` does, and write only the valid lanes.
# - `to_fp32` and `round_to` (from `fastpath_lib.triton_casts`, which any op's kernel can use) are Triton's own
#   conversions on a GPU. Triton 3.8's interpreter is not faithful to them for bf16 (it truncates fp32 to bf16 and
#   widens bf16 subnormals to wrong values), so there they work on the bits and a NaN of any bits stays a NaN.
#   `tests/rmsnorm/test_extremes.py` runs them on NaNs of every kind, subnormals, infinities and signed zeros and
#   checks NaN-ness and sign exactly, every other value within the tolerance (it compares no NaN payload bits).
#
# Why tiles of rows: with one row per program, a 128-column row in a 4-warp program (128 threads) would give each
# thread one element, loaded and stored with 2-byte scalar accesses. With 8 rows per program each thread holds 8
# elements, 16 bytes of fp16, which the compiler moves with one vector access.
#
# ## The launcher
#
# The launcher allocates the output, picks `BLOCK_SIZE`, `num_warps` and the rows per program (one rule, in
# `fastpath_lib.rmsnorm.launch`), and launches one program per tile:

# %% tags=["nbval-ignore-output"]
print(inspect.getsource(kernels.launch_settings))
print(inspect.getsource(kernels.forward))

# %% [markdown]
# Block size, warps and rows per program for a few widths (wider rows get more warps, so each thread holds at most
# 16 elements of a row, 32 at 16384 columns; narrow rows share a program, so each thread holds at least 8):

# %%
settings = []
for n_cols in (1, 16, 128, 181, 781, 4096, 16384):
    block, warps = kernels.launch_settings(n_cols)
    tile = kernels.forward_rows_per_program(n_cols)
    settings.append({"n_cols": n_cols, "BLOCK_SIZE": block, "num_warps": warps,
                     "rows per program": tile, "elements per thread": tile * block // (32 * warps),
                     "idle lanes per row": block - n_cols})
pd.DataFrame(settings).set_index("n_cols")

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
    mismatch = compare(y, reference_rms_norm(x, [181], w, 1e-6), dtype)
    print(f"{str(dtype):15} forward 37x181: mismatch = {mismatch}")

# %% [markdown]
# Dispatch (`fastpath_lib.rms_norm`) would *not* send this fp32 call to Triton: its row stride of 724 bytes is not
# a multiple of 16, so 16-byte vector loads cannot be used. The values are right (the cell above just computed them);
# what misalignment costs in time is a prediction until a GPU run measures it (the compiled code below shows the
# mechanism, not a time). The predicate's condition here is about speed, not correctness (lesson 03):

# %%
x = torch.randn(37, 181, device=DEVICE)
print(fastpath_lib.explain(x, [181], torch.ones(181, device=DEVICE)).failed)

# %% [markdown]
# ## What alignment changes in the compiled code
#
# "Vector loads cannot be used" can be checked without a GPU. Triton compiles for a GPU target on any machine
# (`triton.compile` with a `GPUTarget`, and the `ptxas` its wheel ships); `fastpath_lib.rmsnorm.compiled` does it
# in subprocesses and reads the facts from the code: the narrowest global load and store in bytes, how many load
# instructions, registers per thread and spilled bytes. *Aligned* is a launch the predicate admits: every pointer a
# multiple of 16 bytes (Triton sees that itself and specializes on it) and every row stride and the width whole
# 16-byte vectors, which the launcher checks and passes to the kernel as `VEC` (elements per vector: 8 in fp16, 4 in
# fp32), so the kernel can promise the compiler `tl.multiple_of(stride, VEC)`; *misaligned* is a launch with none of
# that (`VEC = 1`). Four forward specializations for sm_90: fp16 at 4096 columns, and fp32 at 128 columns
# (narrow rows, 8 per program). These are compile-time facts for the target, not GPU timings, and the numbers can
# change with the Triton version (the output is not compared by the notebook tests):

# %% tags=["nbval-ignore-output"]
from fastpath_lib.rmsnorm import compiled

specs = [*compiled.specializations([4096], archs=(90,), dtypes=("float16",), kernels=("forward",),
                                   aligned=(True, False), weights=("same",)),
         *compiled.specializations([128], archs=(90,), dtypes=("float32",), kernels=("forward",),
                                   aligned=(True, False), weights=("same",))]
why_not = compiled.missing_tools()  # None where Triton's NVIDIA backend and ptxas are installed
facts = [] if why_not else compiled.facts(specs)  # a few seconds per specialization
columns = ["arch", "dtype", "block", "warps", "rows_per_program", "aligned", "load_bytes",
           "store_bytes", "load_ops", "registers", "spills"]
(pd.DataFrame(facts, columns=columns) if facts
 else print("cannot compile for a GPU target here:", why_not))

# %% [markdown]
# The part that does not depend on the Triton version: aligned launches move 16 bytes per load and store
# instruction, misaligned ones a single element, because the compiler may not assume that a 16-byte access stays
# inside one aligned vector. Four (fp32) to eight (fp16) times the instructions for the same bytes is why the
# alignment conditions exist.

# %%
for f in facts:
    kind = "aligned" if f["aligned"] else "misaligned"
    print(f"{f['dtype']:8} block {f['block']:5}  {kind:10}  "
          f"load {f['load_bytes']:2} B  store {f['store_bytes']:2} B")

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
#   `row < n_rows` switches off the rows past the end);
# - per row, a first read of `x` and `dy` (and `w`) gives the two row sums: `rstd`, recomputed from `x` (cheaper
#   than saving it from the forward: one fewer tensor to store and read), and the mean of `g * n`;
#   `evict_last` asks the cache to keep the row;
# - a second read of the same row (`evict_first`: its last use) gives `n`, `dy` and then `dx`, so between rows
#   only the `dw` accumulator stays in registers. Holding `x`, `dy`, `w` and `dw` of a 16384-wide row at once would
#   make the compiled kernel spill registers to local memory;
# - it accumulates `dy * n` into `dw_acc` in fp32 registers, and writes it once into *its own* row of an fp32
#   partial buffer;
# - the launcher picks the row block (`launch.backward_grid`): power-of-two blocks for at most 4 programs per
#   multiprocessor, except fp32 rows wider than 8192 columns (`BLOCK_SIZE` 16384, 32 warps), which get **one row per
#   program** (`launch.backward_max_rows`). With 2 or 4 rows the loop carries the 16384-wide `dw_acc` from row to
#   row, and compiled that way the kernel spills to local memory on some targets; with one row it spills on none of
#   sm_75, sm_80, sm_86, sm_89, sm_90 and sm_120 with the pinned Triton 3.8. Spills are counted by compiling for
#   those targets on a CPU-only machine (`fastpath_lib.rmsnorm.compiled`, `tests/rmsnorm/test_compiled.py`); the price of
#   one row per program is not measured on a GPU either: one fp32 partial row per input row, so the scratch is as
#   large as the fp32 input, written by the kernel and read back by the sum;
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
# The backward's traffic: read `x`, `dy` (`2N`, twice, the second time mostly from cache) and `w`, write `dx`
# (`N`) and the fp32 partials (`programs × C`, summed afterwards). The composite backward through autograd reads
# and writes several intermediates more.
#
# ## The traffic counted, beside the model
#
# The byte formulas above are a model. Without a GPU the kit can also *count*: Triton's interpreter runs every
# `tl.load` and `tl.store` in Python with the address and mask of every lane, and `fastpath_lib.traffic.watch()`
# listens to them, per launch and per tensor argument. It also reports any masked-in lane outside the tensor it
# belongs to, with the program id, the offsets and the mask (the kit's boundary tests run every kernel under it).
# One forward and backward call through the dispatch, 16 × 512 bf16 (the interpreter only):

# %% tags=["nbval-ignore-output"]
from fastpath_lib import traffic

x = torch.randn(16, 512, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
w = torch.randn(512, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
dy = torch.randn(16, 512, device=DEVICE, dtype=torch.bfloat16)
if runtime.interpreter_enabled():
    with traffic.watch() as counted:
        torch.autograd.grad(fastpath_lib.rms_norm(x, [512], w), (x, w), dy)
    print(counted.report())
else:
    print("compiled kernels: the interpreter's checker cannot see them (the table below needs a CPU run)")

# %% [markdown]
# Each tensor has two numbers. *Requested* bytes count every lane each time a program asks for it; *distinct* bytes
# count each byte once per launch. They differ where data is read again: the weight is read by every program (each
# tile of rows loads it), and the backward reads each row of `x` and `dy` twice. That is logical traffic. On a GPU the
# repeats are expected to be served by the L2 cache (the weight is 1 KiB; the second read of a row follows the first
# closely, and `evict_last` asks the cache to keep it), so DRAM should see roughly the distinct bytes, and those are
# what the model and the bandwidth are about. A GPU profiler's count of DRAM bytes (Nsight Compute) is what would
# confirm it; the kit's evidence run does not record one. The model beside the count, call by call (`bench.mechanism`,
# the same columns the bench writes into `results.csv` on a CPU run):

# %%
from fastpath_lib.bench import mechanism
from fastpath_lib.bench.timing import bytes_moved

calls = {"forward": lambda: fastpath_lib.rms_norm(x.detach(), [512], w.detach()),
         "backward": lambda: torch.autograd.grad(fastpath_lib.rms_norm(x, [512], w), (x, w), dy)}
table = "not counted: the kernels are compiled for the GPU here"
if runtime.interpreter_enabled():
    rows = [{"pass": p, "rows": 16, "cols": 512, "dtype": "bfloat16",
             "bytes_moved": bytes_moved(16, 512, torch.bfloat16, p), **mechanism.count_call(call)}
            for p, call in calls.items()]
    table = pd.DataFrame([{**r, "requested / distinct": round(r["requested_bytes"] / r["counted_bytes"], 2),
                           "count against model": mechanism.explain(r)[1]} for r in rows]).set_index("pass")
    table = table[["bytes_moved", "counted_bytes", "requested_bytes", "requested / distinct", "scratch_bytes",
                   "oob_accesses", "launches_per_call", "count against model"]]
table

# %% [markdown]
# The forward's count equals the model: `x` read once, `y` written once, the weight once (2 passes plus the
# weight). The backward's count (forward and backward, as the bench times it) is 92,160 bytes against a model of
# 84,992: the difference is the fp32 partial-`dw` scratch, 4 programs × 512 columns × 4 bytes written by the
# kernel and reduced by `torch.sum`, in place of the 1,024 bytes of `dw` the model writes. The model leaves the
# scratch out by design (it is the kernel's cost, not the problem's), and a test fails on any difference the kit
# cannot explain this way. The same count puts the fused residual-add kernel (`fused_add_rms_norm`) at 4 passes
# plus the weight, where an unfused add and norm move 5 (the sum written, then read again).
#
# ## Benchmark: GB/s from bytes moved
#
# Throughput is `bytes_fused / time`, compared with the device's memory bandwidth. On a GPU the cell below measures
# with `triton.testing.do_bench` (warm-up, many repetitions, L2 flushed before each; `return_mode="median"`, since
# its default returns the mean); without a GPU it measures **nothing** —
# the interpreter runs programs one by one in numpy, and its timings say nothing about a GPU. Recorded GPU results
# live in `results/<device>-<date>/` (written on a GPU by `python -m fastpath_lib evidence` or `bench`, read by
# lessons 05-07); the cell says whether there is one.

# %% tags=["nbval-ignore-output"]
if DEVICE == "cuda":
    import triton

    rows, cols = 4096, 4096
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    ms = triton.testing.do_bench(lambda: kernels.forward(x, w, 1e-6), return_mode="median")
    print(f"forward {rows}x{cols} bf16: {ms * 1e3:.1f} us, "
          f"{bytes_fused(rows, cols, 2) / ms / 1e6:.0f} GB/s")
else:
    from fastpath_lib import bench

    print("No GPU here: nothing measured (interpreter timings are not GPU measurements).")
    print("Recorded GPU results in results/:",
          bench.latest_gpu_results(root="../results") or "none committed")

# %% [markdown]
# ## What the numbers say
#
# - The formula bounds the gain: fused moves 3.5× fewer bytes than the composite, but the real baseline
#   (`F.rms_norm`) may already be fused, so the honest comparison is against it, measured.
# - A kernel near the device's bandwidth has no headroom left; one far below it is limited by something else
#   (launch overhead on small shapes, too few rows to fill the GPU, misaligned loads).
# - Small calls are launch-bound: that is why the predicate has a row threshold.
# - The compiled code explains a mechanism (16-byte vs one-element accesses, spills); only a GPU run says how much
#   time it costs.
#
# ## What the interpreter cannot show
#
# On a CPU every kernel *launch* in this lesson ran in Triton's interpreter, which executes each program in turn as
# numpy array operations (the compiled-code cells compile for a GPU target without launching anything). That checks the values, the masks and the bytes each launch touches. Five properties of a GPU kernel
# are outside what such a run on real, small tensors shows by its values (two of them a watch or a launch built for
# them can probe), and each has a tool that does:
#
# | property | why a CPU run misses it | what catches it |
# |---|---|---|
# | races (two programs, or two threads, touching the same memory) | programs run one after another, each whole: nothing ever interleaves, so a race gives the same answer every run | between programs, on global memory: the access watch with `races=True` (`traffic.watch(races=True)`, which exercises 02 and 08 use) records which programs touch each byte and flags one that a program writes and another touches with no atomic ordering them; between the threads of one program, `compute-sanitizer --tool racecheck` on a GPU for shared memory; and a design without races (the backward's per-program `dw` partials, overlapping in-place calls sent to the fallback) and the aliasing tests run on a GPU |
# | `int32` offset overflow past 2³¹ elements | a CPU test cannot allocate real tensors that large (2³¹ bf16 elements are 4 GiB per tensor, far too slow for the interpreter to run routinely), so the small shapes it runs never reach the wrap. The offset arithmetic can be probed without the memory: a launch whose row stride lies, as exercise 02's check does (a stride that puts row 3 at 2³² + 8 elements, on tensors that hold row 0 only; the interpreter wraps `int32` as a GPU does, so an `int32` `row * row_stride` lands back inside them) | that probe, for the arithmetic; otherwise a GPU test with a real tensor that large under `PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck` (a wrapped offset lands outside the tensor); reading the kernel for the `int64` cast of the row index (knowledge check 2) |
# | timing | numpy on a CPU says nothing about a GPU's time | a GPU run: `triton.testing.do_bench`, the kit's `bench` and `evidence` commands, and a profiler (Nsight Systems for the timeline, Nsight Compute for one kernel) |
# | occupancy | no SMs, no warps, no register file | the compiled-facts check (registers and shared memory per program, from code compiled for each GPU target on this CPU: `fastpath_lib.rmsnorm.compiled`, `tests/rmsnorm/test_compiled.py`), and Nsight Compute's achieved occupancy on a GPU |
# | register spills | the interpreter compiles nothing | the compiled-facts check (`ptxas -v` spill bytes, for every specialization the launchers use), and Nsight Compute's local-memory traffic on a GPU |
#
# Out-of-bounds accesses are not on the list: a CPU run does catch them here, through the access watch above
# (`traffic.watch()`) and the guard bands of lesson 04, and `compute-sanitizer --tool memcheck` does on a GPU (with
# `PYTORCH_NO_CUDA_MEMORY_CACHING=1`, lesson 04). The exercises that grade a kernel under the interpreter (02, 08,
# 12) say which of these their checks cannot see.
#
# ## Recap
#
# - A tile of rows per program, fp32 accumulation, one rounding at the store; the mask handles any width.
# - The backward recomputes `rstd`, reads each row twice to stay within its registers, and reduces `dw`
#   deterministically through per-program partials.
# - Compiled for sm_90 on this machine, aligned launches use 16-byte accesses and misaligned ones do not: the
#   mechanism behind the predicate's alignment conditions.
# - Test on irregular shapes against the float64 reference; report GB/s from bytes moved, measured on a GPU only.
# - Count before you time: the interpreter's distinct bytes match the model (the backward's fp32 scratch aside);
#   requested bytes above them are re-reads a GPU serves from cache.
# - Timing, occupancy and spills need a GPU or the compiled facts: a CPU run of the interpreter cannot show them.
#   Races between programs show only to a watch of which program touches each byte (`traffic.watch(races=True)`);
#   races inside a program need a GPU. `int32` offset overflow at 2³¹ elements needs a tensor that large on a GPU, or a launch whose row stride
#   lies (exercise 02's check) to probe the arithmetic on the CPU.
#
# ## Knowledge check
#
# Answer each question in your own words first, then open the guide.
#
# **1. Why divide by `n_cols` and not by `BLOCK_SIZE` in the mean square?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# `BLOCK_SIZE` is the next power of two, so for 181 columns it is 256: the 75 masked lanes load 0 and add nothing to
# the sum, but dividing by 256 would shrink the mean square and scale every output up. The mean is over the row's
# real width. Only irregular widths catch this; at 1024 columns both divisors are equal.
# </details>

# %% [markdown]
# **2. What goes wrong if the row index stays `int32` for a 140 000 × 16 384 input (16 384 columns: the widest row
# the predicate sends to the kernel)?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# `row * X_row_stride` reaches about 2.3 × 10⁹, past the largest `int32` (2³¹ − 1 ≈ 2.1 × 10⁹): the offset wraps
# to a negative number and the kernel reads and writes the wrong memory, silently. Casting the program id to
# `int64` first keeps the arithmetic exact. (A wider row, say 32 768 columns, would never reach the kernel:
# `MAX_COLS` sends it to `F.rms_norm`. The overflow needs many rows, not wide ones.)
# </details>

# %% [markdown]
# **3. Why does the backward write per-program partials instead of using `tl.atomic_add` on `dw`?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# Floating-point addition is not associative, and atomics add in whatever order the programs finish, so `dw` would
# change in its last bits from run to run. Partials summed in a fixed order give the same bits every run, which
# keeps the fast path under `torch.use_deterministic_algorithms(True)` and makes failures reproducible.
# </details>

# %% [markdown]
# **4. The compiled code shows 16-byte loads for an aligned launch and 2-byte loads for a misaligned one. What does
# that tell you about speed, and what does it not?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# It tells you the mechanism: a misaligned launch needs eight times as many load and store instructions for the same
# bytes, so the predicate's alignment conditions have a reason. It does not tell you the time: whether those
# instructions cost anything depends on the GPU, the memory system and the shape, so the cost is a GPU measurement,
# and the compile-time facts are labelled as such.
# </details>

# %% [markdown]
# **5. The forward requests about 1.45 times the bytes it counts as distinct. Where do the extra bytes come from,
# and should the GB/s figure use requested or distinct bytes?**

# %% [markdown]
# <details><summary>Answer guide</summary>
#
# From the weight: every program loads the whole weight again (in the tile's shape, once per row of the tile), so
# at 16 × 512 bf16 it is requested 16 times and stored once in memory. On a GPU those re-reads are expected to hit
# the cache (a 1 KiB weight stays there), so DRAM should move about the distinct bytes (a profiler's DRAM count would
# confirm it). GB/s measures DRAM throughput against the
# copy ceiling, so it uses the distinct bytes, which is the model: dividing requested bytes by the time would
# credit the kernel with bandwidth it never used.
# </details>

# %% [markdown]
# ## Read next
#
# - [Exercise 02](../exercises/ex02_forward_kernel.ipynb): write a fused residual-add RMSNorm kernel and its backward.
# - [Lesson 03](03_eligibility_predicate.ipynb): when the kernel runs, and why not.
