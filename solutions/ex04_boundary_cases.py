# ---
# jupyter:
#   fastpath:
#     exercise: ex04
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
# # Exercise 04 — boundary cases, graded by mutation
#
# A good set of boundary tests fails when the fast path is wrong. The grader draws **23 seeded faulty variants**
# (mutants) of the RMSNorm fast path, in seven categories: predicates that are **too loose** (they accept a call
# that must fall back) or **too strict** (they send an eligible call to the fallback) about the shape limits, the
# layout, the alignment and the dtype; forward and backward kernels that compute a wrong result on some eligible
# input; and wrong numerics (where eps goes, which eps is the default, what precision the mean square is summed
# in). Your cases catch a mutant when some case gets a **different route** from the faulty predicate than from the
# correct one, or a **wrong result** (or a write outside the output) from the faulty kernel, forward or backward.
# Each category whose mutants you all catch is a point; the feedback names the categories (and sides) that still
# have survivors and the kind of input they differ on (e.g. "a width that is not a power of two"), never the case
# that would catch them. The mutants are **drawn afresh at every check** (how far past
# a limit, which modulus, which dtype or layout a too-strict predicate refuses): probe each limit exactly and one
# step past it (the step that keeps every other condition met), and give an eligible case of each supported dtype
# and layout, with a weight and without one (`weight=None`); cases fitted to one draw need not catch the next.
#
# Limits in force here (the interpreter's, on any machine): `min_rows = 8`, `max_cols = 16384`, alignment 16 bytes.
# At most 24 cases, each of at most 262,144 elements (rows x cols); more fails every part of the check.
#
# **Write the cases yourself.** Lesson 04 generated its boundary points from the predicate's declarations; here you
# choose them, from the conditions in the table below, so that each case says which limit it probes and why. An
# answer that calls into the kit's boundary generator (`fastpath_lib.boundary`, whose `overrides` reads the
# predicate's declared boundaries) or the grader (`fastpath_lib.grading`) fails every part of the check. Reading the table and writing its limits into your cases is the exercise.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %% tags=["nbval-ignore-output"]
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
from IPython.display import Markdown
from fastpath_lib.rmsnorm.predicate import PREDICATE
Markdown(PREDICATE.markdown_table())  # the conditions your cases probe


# %% [markdown]
# ## The spec
#
# `CaseSpec(rows, cols, dtype, weight="same"|None|dtype, layout, pad, offset, weight_offset, scale)`; layouts are
# `contiguous`, `batched`, `row_slice` (row stride `cols + pad`), `step` (every other row), `transposed`,
# `permuted`.
#
# The check judges every case under the interpreter's limits above, on any machine. `fastpath_lib.explain(*CaseSpec(
# ...).build().args())` tells you a case's route under the limits of the machine it runs on: on a CPU these are the
# same; on a GPU it applies CUDA's row threshold (your GPU's recorded sweep, or 1024 rows without one), so a case of 8
# rows that the check counts as eligible goes to the fallback there. The route under the check's limits, on any
# machine:
#
# ```python
# import dataclasses
# from fastpath_lib.rmsnorm.predicate import PREDICATE, Limits, make_call
# PREDICATE.evaluate(dataclasses.replace(make_call(*CaseSpec(8, 64).build().args()), limits=Limits())).route
# ```

# %%
def my_boundary_cases():
    """Return a list of `CaseSpec`: the boundary cases."""
    # BEGIN SOLUTION
    f16 = torch.float16
    return [
        CaseSpec(8, 64),                          # exactly at the row threshold: eligible
        CaseSpec(7, 64),                          # one row below it: falls back
        CaseSpec(8, 16384),                       # exactly at the column limit: eligible
        CaseSpec(8, 16388),                       # 16 bytes past the limit, row stride still aligned: falls back
        CaseSpec(16, 64, layout="permuted"),      # dims that do not collapse
        CaseSpec(16, 64, layout="transposed"),    # last dim not contiguous
        CaseSpec(10, 48, layout="row_slice", pad=4),  # eligible row slice: width 48 (not a power of two),
                                                  # stride 52, 10 rows (a partial block of rows in the backward)
        CaseSpec(8, 32, layout="step"),           # eligible: every other row of a wider buffer
        CaseSpec(8, 32, layout="batched"),        # eligible: a 2 x 4 batch of rows (a 3-d input)
        CaseSpec(16, 64, offset=2),               # pointer 8-byte aligned, not 16: falls back
        CaseSpec(16, 64, offset=4),               # pointer 16-byte aligned, not 32: eligible
        CaseSpec(16, 17),                         # row stride 68 bytes
        CaseSpec(16, 64, weight_offset=1),        # misaligned weight
        CaseSpec(16, 64, torch.float64, weight=torch.float32),  # unsupported input dtype, valid weight
        CaseSpec(16, 24, torch.bfloat16, weight=None),  # bf16, no weight, tail not a multiple of 16
        CaseSpec(16, 64, scale=1e-2),             # tiny fp32 values: eps placement matters
        CaseSpec(16, 64, f16, scale=1e-2),        # tiny fp16 values: which eps is the default matters
        CaseSpec(16, 64, f16, scale=300.0),       # large fp16 values: their squares overflow fp16
    ]
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_boundary_cases(my_boundary_cases)

# %% [markdown]
# ## Questions
#
# 1. Which single case catches a kernel that averages over the whole block and one that does not mask its tail?
#    Why is that not enough to catch a kernel that ignores the row stride?
# 2. Why is `CaseSpec(8, 64)` worth more than `CaseSpec(1000, 64)` as a row-threshold test, and why do you need
#    `CaseSpec(7, 64)` as well?
# 3. A too-strict predicate never produces a wrong number. What does it cost, and which test catches it?
# 4. The mutants here are seeded by hand. What kind of bug could none of them represent?
