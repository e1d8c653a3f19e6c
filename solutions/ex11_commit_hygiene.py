# ---
# jupyter:
#   fastpath:
#     exercise: ex11
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
# # Exercise 11 — commit hygiene: refactors apart from the semantic change
#
# A reviewer reads a refactor commit asking one question, "does anything behave differently?", and expects the answer
# no; the semantic commit gets the hard questions. Mixing the two hides a behaviour change among renames. Below are the
# hunks of one change (lesson 03's row-width condition, with what prepares and follows it). Sort them into an ordered
# list of commits, `plan_commits(hunks) -> [{"kind": ..., "message": ..., "hunks": [ids]}, ...]`, where `kind` is:
#
# * `"refactor"`: changes no behaviour (renames, moves). Refactor commits come **first**;
# * `"behaviour"`: a semantic change. **Routing a call site through the new op is a behaviour change** (the calls
#   now take another route), even though the diff looks like a rename;
# * `"test"`: tests only, committed **before** the change they test (a behaviour commit may also carry its tests:
#   with or before, never after);
# * `"docs"`: documentation, in the commit of the change it describes or after it.
#
# Hunks that only work together (the two halves of a move, a rename and the imports it breaks) share a commit, and no
# hunk comes before one it uses: every commit must leave the suite green. Read the diffs, not only the descriptions.
#
# The check gives the hunks **new ids, in a new order, at every call**: build the plan from the hunks you are given
# (for instance by description), never from ids written down. Feedback names the rule a plan breaks, not the hunk.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints `passed`, or the rules your plan breaks.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %%
from fastpath_lib import exercises as ex

hunks = ex.change_hunks(seed=0)
for h in hunks:
    print(f"{h['id']}  {h['file']}\n    {h['description']}")
    print("\n".join("      " + line for line in h["diff"].splitlines()), "\n")


# %%
def plan_commits(hunks) -> list[dict]:
    """The commits in order, each a dict:
    {"kind": "refactor" | "test" | "behaviour" | "docs", "message": str, "hunks": [ids]}."""
    # BEGIN SOLUTION
    plan = [  # (kind, message, descriptions of its hunks)
        ("refactor", "Rename _stride_ok to _row_stride_aligned", [
            "Rename the helper _stride_ok to _row_stride_aligned (the name says what it checks); every caller updated",
            "Update the test module's import of the renamed helper"]),
        ("refactor", "Move row_bytes from predicate.py to layout.py", [
            "Move row_bytes(t) out of predicate.py (unchanged); predicate.py imports it from layout.py",
            "Add row_bytes(t) to layout.py, the same function moved from predicate.py"]),
        ("behaviour", "Predicate: the row width in bytes must be a multiple of 16", [
            ("New condition row_width_aligned: the row width in bytes must be a multiple of 16 (a width-62 row slice "
             "in stride 64 now falls back)"),
            "Test: a width-62 row slice in stride 64 falls back, width 64 stays eligible",
            "README: the predicate's table of conditions gains row_width_aligned",
            "CHANGELOG: calls whose row width is not a multiple of 16 bytes now take the fallback"]),
        ("behaviour", "Predicate: check the row stride of 1-D inputs too (was: always aligned)", [
            "Simplify _row_stride_aligned: drop the early return for 1-D inputs"]),
        ("behaviour", "Route Block.norm through fastpath_lib.rms_norm", [
            "Route Block.norm through fastpath_lib.rms_norm instead of F.rms_norm",
            "Test: Block.norm takes the fast path for an eligible input and matches F.rms_norm"]),
    ]
    id_of = {h["description"]: h["id"] for h in hunks}
    return [{"kind": kind, "message": msg, "hunks": [id_of[d] for d in descs]} for kind, msg, descs in plan]
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_commit_plan(plan_commits)

# %% [markdown]
# ## Questions
#
# 1. The "Simplify" hunk's description sounds like a refactor. Why is it not one, and what should its commit carry
#    that this change does not give it?
# 2. Why may the tests of a change come *before* it, but never after it?
#
# <details><summary>Answer guide</summary>
#
# 1. Its diff removes an early return: 1-D inputs used to count as aligned and are now checked, so some calls change
#    route. A refactor is defined by behaviour, not by its wording. It is a semantic change, and it should come with a
#    test of a 1-D input whose stride is not aligned (a reviewer would ask for one).
# 2. A test committed first fails until the change lands (marked as an expected failure, it documents the bug or the
#    spec), and then shows the change does what it says; a test committed after leaves a commit whose behaviour change
#    nothing checked, and a bisect that lands there learns nothing.
# </details>
