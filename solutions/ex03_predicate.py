# ---
# jupyter:
#   fastpath:
#     exercise: ex03
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
# # Exercise 03 — predicate conditions for a changed spec
#
# A downstream team wants a stricter fast path, *v2*: **at most 8192 columns, only fp16 and bf16 inputs, and
# 32-byte alignment** (the input's data pointer, and the row stride in bytes when there is more than one row).
# Write the three conditions as small named checks in the style of lesson 03: each takes the call context `c`
# (`c.input`, `c.weight`, `c.normalized_shape`) and returns `None` when it holds, or a reason naming the actual
# and the required value (`"input float32, need float16 or bfloat16"`). The checks probe your conditions on a set
# of cases (1-D, 2-D and 3-D inputs, one row and many, row slices, leading strides unlike the row stride), compare
# the decisions with the spec, and check that each reason names both values and no value that is not the case's
# own or the rule's (a reason listing every number or dtype names the actual one by chance).
#
# Write them from the spec below. The grader's own code for this rule is not yours to call: a part whose conditions
# or predicate call the check's decisions (`fastpath_lib.grading.checks.ex03_predicate`, what your decisions are
# compared with) or the grader's faulty predicates (`fastpath_lib.grading.rules.mutants`, one of which is a 32-byte
# alignment condition) fails.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
import math
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
from fastpath_lib.eligibility import Condition, Predicate
from fastpath_lib.rmsnorm.predicate import PREDICATE


# %% [markdown]
# ## The spec (plain torch)
#
# ```python
# dtype_ok = x.dtype in (torch.float16, torch.bfloat16)
# cols_ok = x.shape[-1] <= 8192
# rows = math.prod(x.shape[:-1])  # rows of the last dim: the product of the leading dims
# stride = ex.row_stride(x)  # elements between rows; None if the dims do not collapse
# align_ok = x.data_ptr() % 32 == 0 and (
#     rows <= 1 or stride is None or stride * x.element_size() % 32 == 0)
# ```
# (`stride is None` is left to the `row_stride` condition.)

# %%
def check_dtype(c):
    """Return `None` when the input's dtype meets the v2 spec, else a reason naming the actual value and the required
    one."""
    # BEGIN SOLUTION
    if c.input.dtype in ex.V2_DTYPES:
        return None
    return f"input {c.input.dtype}, need float16 or bfloat16"
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_dtype_condition(check_dtype)


# %%
def check_cols(c):
    """Return `None` when the row width meets the v2 spec, else a reason naming the actual value and the required
    one."""
    # BEGIN SOLUTION
    n = c.input.shape[-1] if c.input.dim() else 1
    return None if n <= ex.V2_MAX_COLS else f"{n} columns, need <= {ex.V2_MAX_COLS}"
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_cols_condition(check_cols)


# %%
def check_alignment(c):
    """Return `None` when the data pointer and the row stride meet the v2 spec, else a reason naming the actual value and the required
    one."""
    # BEGIN SOLUTION
    x, a = c.input, ex.V2_ALIGN_BYTES
    if x.data_ptr() % a:
        return f"data pointer {x.data_ptr() % a} bytes past a {a}-byte boundary, need 0"
    rows, stride = x.numel() // max(x.shape[-1], 1), ex.row_stride(x)
    if rows > 1 and stride is not None and stride * x.element_size() % a:
        return f"row stride {stride * x.element_size()} bytes, need a multiple of {a}"
    return None
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_alignment_condition(check_alignment)


# %% [markdown]
# ## The v2 predicate
#
# Assemble the predicate: your three conditions plus the unchanged `non_empty`, `last_dim_contiguous` and
# `row_stride` conditions of the kit's predicate (`PREDICATE["non_empty"]` etc.), each with a requirement in words
# and a category.

# %%
def make_v2_predicate():
    """Return a `Predicate` with the three conditions above (`Condition(name, requirement, check, category)`)."""
    # BEGIN SOLUTION
    return Predicate("rmsnorm_v2", [
        Condition("dtype", "input fp16 or bf16", check_dtype, "dtype"),
        Condition("cols", f"row width <= {ex.V2_MAX_COLS}", check_cols, "shape"),
        PREDICATE["non_empty"], PREDICATE["last_dim_contiguous"], PREDICATE["row_stride"],
        Condition("alignment", "32-byte input pointer and row stride", check_alignment, "alignment"),
    ])
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_v2_predicate(make_v2_predicate)

# %% [markdown]
# ## Questions
#
# 1. Why must every condition report the *actual* value, not only "not eligible"?
# 2. Which probe shows that a single-row input should pass the alignment condition whatever its width?
# 3. What would go wrong if the predicate returned after the first failing condition?
