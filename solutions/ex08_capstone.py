# ---
# jupyter:
#   fastpath:
#     exercise: ex08
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
# # Exercise 08 — capstone: the same workflow on an operator you choose
#
# Apply the whole workflow to a row-wise operator of your choice with the kit's generic pieces
# (`fastpath_lib.eligibility.Predicate/Condition/Boundary`, `fastpath_lib.cases.CaseSpec`). The solution uses a
# **row-wise softmax**. Set `OP_NAME`, once, to one of `ex.KNOWN_OPS` (`"softmax"`, `"log_softmax"`,
# `"l2_normalize"`, `"layer_norm"` without affine parameters, eps 1e-5): every check compares with the kit's own
# float64 reference for that operator, never with yours, and every check must see the same `OP_NAME`.
#
# 1. a float64 reference written from the definition (not by calling torch's op); 2. a small Triton kernel (one
# program per row), which the checks watch being launched; 3. a predicate whose conditions *declare* their
# boundaries, which the check verifies; 4. a dispatching op that takes the predicate's route and on the Triton route
# returns what your launcher `launch(x)` returns, `y` of the input's dtype on both routes (the kernel's output too;
# the grader runs `launch` and your kernel itself on the same input
# and compares; the check calls the op on inputs of 5 to 16 rows, among them a transposed and a float64 input: the
# op must take your predicate's route on each, and the cases must reach both routes, as a row threshold of at most 16
# such as lesson 03's 8 under the interpreter does; the op only reads its input: a write into it fails the case).
# The dispatch check also calls the op at the widest and the narrowest width your predicate admits (found from the
# predicate itself, up to 65536 columns), each at the fewest rows it admits there.
#
# **Your launcher in the grader.** The grader runs `launch` on tensors that hold no values (`device="meta"`, with your
# input's shapes, dtypes and strides) and replays what it allocated, copied, viewed and launched on the real input:
# `launch` may read shapes, dtypes and strides, allocate (`torch.empty_like(x)`, `torch.empty(..., device=x.device)`),
# copy (`.contiguous()`, `.to(dtype)`), make views and launch kernels, but not read values (`.item()`, `.tolist()`,
# `.numpy()`, memory through `data_ptr()`) or compute with torch. Nor may it branch on the device: there a tensor's
# `.device` is `meta`, its `.is_cuda` is `False` and its `.data_ptr()` is the view's byte offset from address 0.
#
# **Your kernel in the grader.** The grader compiles every kernel your code launches with Triton's compiler for a GPU
# (sm_80) before it runs any of them under the interpreter, and a part fails when that step refuses one ([a kernel in
# the grader](../docs/reference.md#a-kernel-in-the-grader-exercises-02-and-08), as in exercise 02). The part fails too
# on a comprehension's `if` (the compiler ignores it), a generator expression, an attribute no value of
# `triton.language` publishes (`x.dtype`, `x.shape` and `x.to` are published; `x.handle` is not: Triton sets it on
# every value, but it holds the compiler's IR object, not the language's) and, in this notebook too where the
# interpreter runs your kernel, a data race: a byte one program of a launch writes and another program of that launch
# reads or writes, not both with atomics and with no atomic ordering the two (the first program releasing a word after
# its access and the second acquiring that word before its own, as a lock taken with `tl.atomic_cas` and released with
# `tl.atomic_xchg` does, or a counter every program bumps with `tl.atomic_add`; Triton's atomics acquire and release by
# default, `sem="acq_rel"`, and one with `sem="relaxed"` or `scope="cta"` orders nothing). Accumulate with
# `tl.atomic_add`, or let each program write a partial buffer of its own and reduce the partials afterwards. Since the
# grader compiles and runs your `@triton.jit` function itself, a kernel is defined under `@triton.jit` alone (not under
# `@triton.autotune` or `@triton.heuristics`), and the kernel part and the dispatch part both refuse another decorator:
# choose `BLOCK_SIZE` and `num_warps` in the launcher. The checks in this notebook run your kernel and launcher
# directly, without that compile step and without reading your source (the comprehension's `if`, the generator
# expression, the attribute, the decorator and the `int32` product below are the grader's to find); where the
# interpreter runs your kernel, the kernel check finds a data race here too. `python -m fastpath_lib grade` gives the
# grader's verdict.
#
# **What the checks refuse.** The reference, the launcher and the op's Triton route compute the operator themselves:
# a part fails when they call torch's own operator, for `softmax` and `log_softmax` any operator of torch's *softmax*
# family (`torch.softmax`, `F.log_softmax`, `F.softmin`, `torch.nn.Softmax`, ..., under every name the installed torch
# has), for `l2_normalize` and `layer_norm` any of its *normalization* family (`F.normalize`, `F.layer_norm`,
# `F.rms_norm`, `torch.nn.LayerNorm`, ...). The fallback route calls torch's operator, as a fallback does. The
# reference, the launcher and the op may not call the kit's RMSNorm operator (`fastpath_lib.rmsnorm.op`) or its kernels
# (`fastpath_lib.rmsnorm.kernels`), which would do the normalizing for them; they and the evidence functions
# (`capstone_matrix`, `plot_points`) may not call the grader's code (`fastpath_lib.grading`), which holds the
# references the checks compare with.
#
# The reference and the kernel checks run irregular shapes and the inputs where each operator's known mistakes show:
# for `softmax` and `log_softmax`, one logit of 100 per row (`exp(100)` overflows fp32) and rows around +1000 and
# -1000 (`exp(1000)` overflows fp32 and fp64 alike, and `exp(-1000)` underflows to 0 in both, so a naive sum is 0:
# only a row max subtracted first survives, in the float64 reference too); for `l2_normalize`, a zero row (F.normalize clamps the norm below by 1e-12) and fp16 values near 300 (their
# squares overflow fp16); for `layer_norm`, fp16 rows with a mean of 1000 (where `E[x^2] - E[x]^2` cancels in fp32).
#
# **What these checks cannot grade.** In the grader your kernel runs in Triton's CPU interpreter, on small shapes: the
# grader's checks grade its values, its route, data races between its programs and `int32` row offsets, not timing,
# occupancy or register spills (lesson 02, "What the interpreter cannot show"). On a CPU the checks in this notebook
# run it in the interpreter too and grade its values, its route, data races and `int32` row offsets (by the launches
# below; the source rules are the grader's); on a GPU they launch it compiled and check its values and route only. The
# kernel check grades `int32` row offsets by running `launch` twice more on 3 rows of 16 columns with
# the last program of its launch (one program per row) run once as row 2²⁸ + 3 and once as row 2²⁸ + 2, past 2³¹
# elements, where an offset computed in int32 wraps back to row 3, past the tensors, and to row 2, inside them: it
# compares what the two runs touched (compute the offset in int64: `tl.program_id(0).to(tl.int64)`). Those launches
# move one program per row on axis 0, so the grader also reads your kernel's source, whatever its grid, guards and rows
# per program: it refuses a program id (`tl.program_id`, any axis) multiplied in int32 by a value known only at run time (a
# stride, a row count, a width not passed as `tl.constexpr`). Convert the program id first
# (`tl.program_id(1).to(tl.int64)`) or where it is multiplied (`row.to(tl.int64) * stride`); a product with a
# `tl.constexpr` (`tl.program_id(1) * BLOCK_SIZE`, a column tile) stays int32.
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
from fastpath_lib.eligibility import Boundary, Condition, Predicate

OP_NAME = "softmax"


# %%
def reference(x):
    """Return your operator of `x` over the last dim, computed in float64: a float64 tensor of `x`'s shape."""
    # BEGIN SOLUTION
    x64 = x.detach().to(torch.float64)
    e = torch.exp(x64 - x64.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_capstone_reference(OP_NAME, reference)


# %%
@triton.jit
def softmax_kernel(X_ptr, Y_ptr, X_row_stride, Y_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """One program per row: writes the row's softmax into Y (a kernel returns nothing)."""
    # BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X_ptr + row * X_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y_ptr + row * Y_row_stride + cols, (e / tl.sum(e, axis=0)).to(Y_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION


def launch(x2d):
    y = torch.empty(x2d.shape, dtype=x2d.dtype, device=x2d.device)
    softmax_kernel[(x2d.shape[0],)](x2d, y, x2d.stride(0), y.stride(0), x2d.shape[1],
                                    BLOCK_SIZE=triton.next_power_of_2(x2d.shape[1]))
    return y


# %% tags=["grader-check"]
ex.check_capstone_kernel(OP_NAME, launch)

# %% [markdown]
# ## The predicate
#
# The context is the input tensor itself. Each condition declares boundaries as changes to `BASE` (CaseSpec
# fields) and whether it should then hold; the check builds each point and runs your condition on it. `BASE` itself
# must take the fast path under your predicate: each boundary is a change from an eligible case. Cover at
# least three categories, each condition with a point where it holds and one where it fails. A category counts
# when one of its conditions rejects a declared point that every condition of the other categories accepts: one
# condition copied under three categories counts once.

# %%
BASE = {"rows": 16, "cols": 64, "dtype": torch.float32, "weight": None}
MAX_COLS = 8192


def make_predicate():
    """Return a `Predicate` over the input tensor: one `Condition` per rule of your fast path."""
    # BEGIN SOLUTION
    def dtype(x):
        ok = x.dtype in (torch.float16, torch.bfloat16, torch.float32)
        return None if ok else f"{x.dtype}, need fp16/bf16/fp32"

    def cols(x):
        return None if 0 < x.shape[-1] <= MAX_COLS else f"{x.shape[-1]} columns, need 1..{MAX_COLS}"

    def last_dim(x):
        return None if x.dim() == 2 and x.stride(-1) == 1 else f"strides {x.stride()}, need 2-d with stride 1"

    return Predicate("softmax", [
        Condition("dtype", "fp16, bf16 or fp32", dtype, "dtype",
                  boundaries=(Boundary("fp16", {"dtype": torch.float16}, True),
                              Boundary("fp64", {"dtype": torch.float64}, False))),
        Condition("cols", f"1..{MAX_COLS} columns", cols, "shape",
                  boundaries=(Boundary("cols=max", {"cols": MAX_COLS}, True),
                              Boundary("cols=max+1", {"cols": MAX_COLS + 1}, False))),
        Condition("last_dim_contiguous", "2-d, last dim stride 1", last_dim, "stride",
                  boundaries=(Boundary("row slice", {"layout": "row_slice", "pad": 3}, True),
                              Boundary("transposed", {"layout": "transposed"}, False))),
    ])
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_capstone_predicate(make_predicate, lambda x: x, BASE)


# %%
def softmax(x):
    """The op: Triton where the predicate allows, torch.softmax otherwise; returns (y, route)."""
    d = make_predicate().evaluate(x)
    if d.eligible:
        return launch(x), d.route
    return torch.softmax(x, dim=-1), d.route


# %% tags=["grader-check"]
ex.check_capstone_dispatch(OP_NAME, softmax, make_predicate, lambda x: x)

# %% [markdown]
# ## The evidence package
#
# A reviewer asks of your operator what lesson 05 asked of RMSNorm: where does it help, and where not? Declare its
# benchmark matrix *before* measuring: at least 8 cases as `(case_id, CaseSpec fields, expectation)`, with
# expectation `win`, `neutral`, `loss` or `fallback`. The check routes each case with your predicate: `fallback`
# exactly where it sends a case to the fallback, at least 3 cases on the fast path and 2 on the fallback (rejected by
# 2 different conditions), eligible sizes from launch-bound (<= 4096 elements) to memory-bound (>= 2**20), no case
# above 2**24 elements (the check builds every case on this machine), and at least one eligible case where you
# expect no win. Then give the boundary plot's points: for the check's timings
# `[{"case_id", "rows", "cols", "route", "baseline_us", "candidate_us", "gpu_measurement"}, ...]`, return
# `{"triton": [(rows, speedup), ...], "fallback": [...]}` with `speedup = baseline_us / candidate_us`, GPU
# measurements only, each case on the side of the route it took.


# %%
def capstone_matrix():
    """Return a list of 3-tuples `(case_id, fields, expectation)`: `fields` a dict of `CaseSpec` fields
    (`{"rows": 8, "cols": 64}`), `expectation` one of `ex.OUTCOMES`."""
    # BEGIN SOLUTION
    return [("launch_bound_8x64", {"rows": 8, "cols": 64}, "loss"),
            ("decode_1x4096", {"rows": 1, "cols": 4096, "dtype": torch.bfloat16}, "neutral"),
            ("mid_1024x1024", {"rows": 1024, "cols": 1024}, "win"),
            ("large_2048x1024_fp16", {"rows": 2048, "cols": 1024, "dtype": torch.float16}, "win"),
            ("odd_width_512x1000", {"rows": 512, "cols": 1000}, "neutral"),
            ("fp64_1024x1024", {"rows": 1024, "cols": 1024, "dtype": torch.float64}, "fallback"),
            ("wide_64x16384", {"rows": 64, "cols": 16384}, "fallback"),
            ("transposed_1024x512", {"rows": 1024, "cols": 512, "layout": "transposed"}, "fallback")]
    # END SOLUTION


def plot_points(results):
    """Return `{"triton": [(rows, speedup), ...], "fallback": [...]}` from the GPU-measured rows of `results`."""
    # BEGIN SOLUTION
    sides = {"triton": [], "fallback": []}
    for r in results:
        if r["gpu_measurement"]:
            sides[r["route"]].append((r["rows"], r["baseline_us"] / r["candidate_us"]))
    return sides
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_capstone_evidence(make_predicate, lambda x: x, capstone_matrix, plot_points)

# %% [markdown]
# ## Questions
#
# 1. Which parts of the RMSNorm workflow carried over unchanged, and which did you have to rethink?
# 2. What would your benchmark matrix (exercise 05) look like for this operator?
