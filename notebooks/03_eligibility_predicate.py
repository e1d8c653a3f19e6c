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
# # 03 · The eligibility predicate: when the fast path runs, and why not
#
# **What you will learn**
# - each condition of the RMSNorm predicate, its category and *why* it exists;
# - how `fastpath_lib.explain()` reports every failed condition with the actual and the required value;
# - how to read the boundary of a condition (15/16/17 columns, transposed, offset, threshold − 1);
# - how to explore the predicate interactively (`route_explorer()`).
#
# The design follows PyTorch's SDPA selector: a list of small named checks, each able to say why it failed, in a
# module that imports no GPU code, so it is tested on any machine.

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

# %matplotlib inline
import pandas as pd
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm.predicate import ALLOWED_MODES, PREDICATE, limits_for

LIMITS = limits_for(DEVICE)
pd.set_option("display.max_colwidth", 120)

# %% [markdown]
# ## The conditions
#
# `PREDICATE.table()` lists every condition with its category, the rule in words, why it exists, and the boundary
# points it declares (each marked *in* or *out*). The tests and the PR note's scope section are generated from
# these same declarations.

# %%
conditions = pd.DataFrame(PREDICATE.table())
conditions

# %% [markdown]
# The categories a reviewer will ask about, and how many conditions each has:

# %%
conditions.groupby('category', sort=False).size()

# %% [markdown]
# Some conditions protect **correctness** (device, dtype, arguments, normalized dims, strides, columns), some
# protect **speed** (row threshold, alignment: the kernel would be correct but slower than the baseline), and
# some are **modes** (forced fallback, CUDA graph capture, higher-order gradients). Modes that do *not* force the
# fallback are declared too, each with the reason it is safe:

# %%
pd.DataFrame(ALLOWED_MODES.items(), columns=['mode', 'why the fast path stays on'])

# %% [markdown]
# ## `explain()` inside and outside the boundary
#
# `explain` takes the same arguments as `rms_norm` and returns a `Decision`: `route`, `eligible`, `reasons` (every
# failed condition, with the actual and the required value) and `failed` (the names). We build cases with
# `CaseSpec`, one change at a time from an eligible base case, at the row threshold in force here:

# %%
R = LIMITS.min_rows
cases = {
    "cols=15": CaseSpec(rows=R, cols=15), "cols=16": CaseSpec(rows=R, cols=16),
    "cols=17": CaseSpec(rows=R, cols=17), "transposed": CaseSpec(rows=R, cols=64, layout="transposed"),
    "offset 4 bytes": CaseSpec(rows=R, cols=64, offset=1), "offset 16 bytes": CaseSpec(rows=R, cols=64, offset=4),
    "threshold-1 rows": CaseSpec(rows=R - 1, cols=64), "threshold rows": CaseSpec(rows=R, cols=64),
    "fp64": CaseSpec(rows=R, cols=64, dtype=torch.float64),
}
rows = []
for name, spec in cases.items():
    d = fastpath_lib.explain(*spec.build(seed=0, device=DEVICE).args())
    rows.append({"case": name, "route": d.route, "failed": ", ".join(d.failed)})
pd.DataFrame(rows)

# %% [markdown]
# Widths 15 and 17 fail only `row_stride_alignment`: in fp32 a row of 15 floats is 60 bytes, so every other row
# starts off a 16-byte boundary. The kernel would still be correct (lesson 02 ran 181 columns), but slower. A
# `Decision` renders its reasons in full; here for a case that fails several conditions at once — `explain` runs
# *every* condition, so the user sees all reasons, not only the first:

# %%
x = CaseSpec(rows=R - 1, cols=17, dtype=torch.float64, layout="transposed").build(seed=0, device=DEVICE).x
fastpath_lib.explain(x, [17])

# %% [markdown]
# The same numbers through the fallback switch: `force_fallback()` adds the `forced` reason and restores the
# previous state when the block ends (also on an exception).

# %%
x = torch.randn(2 * R, 64, device=DEVICE)
with fastpath_lib.force_fallback():
    print(fastpath_lib.explain(x, [64]))
print(fastpath_lib.explain(x, [64]))

# %% [markdown]
# Under `torch.compile` the op sees fake tensors while tracing: they have no data pointer, so the alignment
# conditions answer "unknown until run time" and the real decision is taken when the graph runs:

# %%
from torch._subclasses.fake_tensor import FakeTensorMode

with FakeTensorMode():
    print(fastpath_lib.explain(torch.empty(2 * R, 64, device=DEVICE), [64]))

# %% [markdown]
# ## A map of the alignment and row boundaries
#
# Each cell below is one `explain` call (no kernel runs): rows around the threshold × widths 1 to 48, in fp32 and
# fp16. Eligible widths are multiples of 4 elements in fp32 and of 8 in fp16 (16 bytes), from the threshold up.

# %%
import matplotlib.pyplot as plt

widths, row_counts = range(1, 49), [R - 1, R, R + 1]
fig, axes = plt.subplots(2, 1, figsize=(10, 3), sharex=True)
for ax, dtype in zip(axes, (torch.float32, torch.float16)):
    grid = [[fastpath_lib.explain(torch.empty(r, c, device=DEVICE, dtype=dtype), [c]).eligible for c in widths]
            for r in row_counts]
    ax.imshow(grid, cmap="Greens", aspect="auto", extent=(0.5, 48.5, len(row_counts) - 0.5, -0.5))
    ax.set_yticks(range(len(row_counts)), [f"{r} rows" for r in row_counts])
    ax.set_title(f"{str(dtype)[6:]}: green = triton route", fontsize=9)
axes[-1].set_xlabel("cols")
fig.tight_layout()

# %% [markdown]
# ## The explorer
#
# Change a case with the controls and watch the route and the reasons. It only evaluates the predicate, so it
# answers instantly on any machine. (Widget output is not compared by the notebook tests.)

# %% tags=["nbval-ignore-output"]
from fastpath_lib.widgets import route_explorer

route_explorer()

# %% [markdown]
# ## Recap
#
# - Each condition has a name, a category, a rule, a reason to exist and declared boundary points.
# - `explain` runs every condition and reports actual vs required values; invalid calls go to the fallback.
# - Some limits protect correctness, some protect speed; the row threshold comes from a GPU sweep (conservative
#   until one is recorded).
#
# **Questions**
# 1. Which conditions would you drop if the kernel were only ever called on contiguous fp16 inputs? Which must stay?
# 2. An fp16 input with 12 columns falls back, an fp32 one with 12 columns does not. Why? Check with `explain`.
# 3. Why does the predicate report *all* failed conditions instead of stopping at the first?
# 4. What would go wrong if the fake-tensor case answered "eligible" instead of "unknown"?
