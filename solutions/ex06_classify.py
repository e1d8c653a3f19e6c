# ---
# jupyter:
#   fastpath:
#     exercise: ex06
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
# # Exercise 06 — classifying measured results
#
# > **The table below is a SYNTHETIC teaching dataset**: invented numbers in the shape of a results table, so the
# > classification rules can be practised without a GPU. They are *not measurements* of any device.
#
# Classify each case as `win`, `neutral`, `loss` or `fallback`. `my_classify(row)` gets one row of the table, with
# the columns `route`, `baseline_median_us`, `baseline_spread_us`, `candidate_median_us` and `candidate_spread_us`
# (and `case_id`), all times in µs:
#
# * a case whose `route` is `"fallback"` is `"fallback"`, whatever its timings;
# * otherwise `ratio = row["candidate_median_us"] / row["baseline_median_us"]`, and the **noise band** is the larger
#   relative 20-80 % spread of the two sample sets: `max(row["baseline_spread_us"] / row["baseline_median_us"],
#   row["candidate_spread_us"] / row["candidate_median_us"])` (a spread is `q80 - q20`); `ratio < 1 - band` is a
#   win, `ratio > 1 + band` a loss, anything inside the band neutral. This is the rule `fastpath_lib.bench` applies to
#   real runs.
#
# Write the rule yourself: a `my_classify` that calls the kit's benchmark code (`fastpath_lib.bench`, which holds this
# rule) or the grader's (`fastpath_lib.grading`, which holds the expected classes) fails every part.
#
# The check classifies this table and one it draws afresh each time, with points just inside and just outside the
# noise band (the band set by the baseline's spread in some, the candidate's in others): a rule with another band,
# or none, fails every draw, and this rule passes every draw.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or a table of *yours vs expected*.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
results = ex.synthetic_results()
print(results.attrs["source"])
results


# %%
def my_classify(row) -> str:
    """Return 'win', 'neutral', 'loss' or 'fallback' for one row of the table."""
    # BEGIN SOLUTION
    if row["route"] == "fallback":
        return "fallback"
    b, c = row["baseline_median_us"], row["candidate_median_us"]
    band = max(row["baseline_spread_us"] / b, row["candidate_spread_us"] / c)
    ratio = c / b
    return "win" if ratio < 1 - band else "loss" if ratio > 1 + band else "neutral"
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_classification(my_classify)

# %% [markdown]
# ## Questions
#
# 1. `c07` shows a 20 % lower median. Why is it not a win?
# 2. `c10` is faster on the candidate side but routed to the fallback. What does that difference measure?
