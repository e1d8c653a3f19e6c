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
# A reviewer reads a pull request one commit at a time. These rules make that possible (lesson 07 teaches them; the
# words after each colon are what the check holds a plan to, all of it):
#
# * each commit is **either** a change of behaviour **or** a change of structure (a refactor), never both: a hunk
#   that only restructures code goes in a `"refactor"` commit, and a `"refactor"` commit holds nothing else: no
#   behaviour change, no new test, no docs;
# * each commit holds **one** behaviour change, with the tests that check it, so it can be reviewed, bisected and
#   reverted on its own: tests go before or with the change they check, never after; docs go with or after the
#   change they describe, never before; a `"test"` commit holds only tests, a `"docs"` commit only docs, and a
#   `"behaviour"` commit its one change with its tests and docs;
# * **every commit builds and passes the tests** on its own, not only the last one: no hunk comes before a hunk it
#   uses, hunks that only work together go in one commit, and a test of a new behaviour goes with it, not before
#   (it fails there).
#
# Below are the hunks of one piece of work (lesson 03's row-width condition, with what prepares, follows and
# documents it). Sort them into an ordered list of commits,
# `plan_commits(hunks) -> [{"kind": ..., "message": ..., "hunks": [ids]}, ...]`, where `kind` is `"refactor"` (no
# behaviour change), `"behaviour"`, `"test"` (tests only) or `"docs"`, and `message` is a sentence of at least 2 words
# that says what the commit does (a plan with a shorter one scores nothing, as does one that calls the grader's code,
# `fastpath_lib.grading`).
#
# Decide each hunk from its diff, as a reviewer would: what does the code do after it that it did not do before, and
# which test would fail, or could not even be imported, if the commit stopped right after this hunk? A description
# is the author's claim, not the evidence.
#
# The check draws the hunks **afresh at every call**: new ids, a new order, and new texts (the helpers' and the
# condition's names, the function moved, the model's class and file, the numbers and the wording change; what each
# hunk does stays). Build the plan from what each hunk's file and diff show, never from ids or descriptions written
# down. Feedback names the rule a plan breaks and how often,
# not the hunk. A plan earns points once it keeps the second and third rules above: one behaviour change per commit,
# and every commit green. The first rule, refactors apart from behaviour, is graded as a part of its own.
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
def what(hunk) -> str:
    """Return what one hunk does, read from its file and its diff (names, numbers and wording change at every
    draw)."""
    # BEGIN SOLUTION
    file, diff = hunk["file"], hunk["diff"]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+")]
    removed = [line[1:] for line in diff.splitlines() if line.startswith("-")]
    if file.endswith(".md"):
        return "readme" if file.endswith("README.md") else "changelog"
    if file.startswith("tests/"):
        if any(line.startswith("from ") for line in removed):
            return "rename_test"  # the test module's import of the renamed helper
        if "fallback" in diff:
            return "condition_test"  # new behaviour: red before the condition lands
        return "route_test" if "routes" in diff else "pin_test"  # pin: today's values, green before and after
    if any("F.rms_norm" in line for line in removed):
        return "route"  # a call site now takes another op: behaviour
    if "Condition(" in diff:
        return "condition"
    if not removed:
        return "move_in"  # the moved function, added unchanged
    if any(line.startswith("from ") for line in added):
        return "move_out"  # the function removed, imported from its new home
    if any(line.startswith("def ") for line in removed):
        return "rename"
    return "simplify"  # 1-D inputs no longer return early: behaviour
    # END SOLUTION
def plan_commits(hunks) -> list[dict]:
    """Return the commits in order, each a dict:
    {"kind": "refactor" | "test" | "behaviour" | "docs", "message": str, "hunks": [ids]}."""
    # BEGIN SOLUTION
    plan = [  # (kind, message, what its hunks do)
        ("test", "Test that the model's norm agrees with F.rms_norm (today's behaviour, pinned before it changes)",
         ["pin_test"]),
        ("refactor", "Rename the row-stride helper to say what it checks", ["rename", "rename_test"]),
        ("refactor", "Move the row-bytes helper from predicate.py to layout.py", ["move_out", "move_in"]),
        ("behaviour", "Predicate: the row width in bytes must be a multiple of 16",
         ["condition", "condition_test", "readme", "changelog"]),
        ("behaviour", "Predicate: check the row stride of 1-D inputs too (was: always aligned)", ["simplify"]),
        ("behaviour", "Route the model's norm through fastpath_lib.rms_norm", ["route", "route_test"]),
    ]
    id_of = {what(h): h["id"] for h in hunks}
    return [{"kind": kind, "message": msg, "hunks": [id_of[w] for w in does]} for kind, msg, does in plan]
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
