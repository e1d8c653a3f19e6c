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
# # Exercise 11 — commit hygiene: one behaviour change per commit, every commit green
#
# A reviewer reads a pull request one commit at a time. Lesson 07 gave the rules that make that possible:
#
# * each commit is **either** a change of behaviour **or** a change of structure (a refactor), never both;
# * each commit holds **one** behaviour change, with the tests that check it, so it can be reviewed, bisected and
#   reverted on its own (tests go before or with the change they check, never after);
# * **every commit builds and passes the tests** on its own, not only the last one.
#
# Below are the hunks of one piece of work (lesson 03's row-width condition, with what prepares, follows and
# documents it). Sort them into an ordered list of commits,
# `plan_commits(hunks) -> [{"kind": ..., "message": ..., "hunks": [ids]}, ...]`, where `kind` is `"refactor"` (no
# behaviour change), `"behaviour"`, `"test"` (tests only) or `"docs"`.
#
# Decide each hunk from its diff, as a reviewer would: what does the code do after it that it did not do before, and
# which test would fail, or could not even be imported, if the commit stopped right after this hunk? A description
# is the author's claim, not the evidence.
#
# The check gives the hunks **new ids, in a new order, at every call**: build the plan from the hunks you are given
# (for instance by description), never from ids written down. Feedback names the rule a plan breaks and how often,
# not the hunk. A plan earns points once it keeps both of the first two rules: one behaviour change per commit, and
# every commit green.
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
        ("test", "Test that Block.norm agrees with F.rms_norm (today's behaviour, pinned before it changes)", [
            "Test: Block.norm agrees with F.rms_norm for fp32, fp16 and bf16 inputs"]),
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
# 1. Which hunk was hardest to classify, and what in its diff (not its description) decided it? What should its
#    commit carry that this piece of work does not give it?
# 2. Which tests of this piece of work may go in a commit of their own before the change they concern, and which
#    may not? Why?
# 3. Which hunks could not be committed apart from another one, even though they touch different files?
#
# <details><summary>Answer guide</summary>
#
# 1. Usually a hunk whose description sounds like a tidy-up. Read what the code does after it: if any input now
#    gets another result, another exception or another route, the hunk changes behaviour whatever its title says,
#    and it gets its own commit, with a test of exactly those inputs (a reviewer would ask for it).
# 2. Ask of each test: does it pass on the code as it was *before* the change? One that does pins the contract the
#    change must keep, and may go first. One that does not would make its commit red (and a bisect that stops there
#    blames the wrong commit), so it goes in the commit that makes it pass. No test of a change comes after it.
# 3. Pairs where the suite fails between the two halves, in any file: follow what each test file imports, and what
#    each test compares with what, including text that a test checks against the code.
# </details>
