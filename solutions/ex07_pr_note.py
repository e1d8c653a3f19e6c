# ---
# jupyter:
#   fastpath:
#     exercise: ex07
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
# # Exercise 07 — the PR note
#
# Write a function that turns a results table and its environment record into the PR note of lesson 07. The check
# calls it three times: on the synthetic GPU-shaped table of exercise 06 (the environment says it is synthetic), on a
# GPU-shaped table it draws at random (new case ids and numbers: write from the data, not for one table), and on a
# CPU-interpreter-shaped table.
#
# **How the note is graded.** The autograder scores only structured elements, each counted only where it matches its
# stated form exactly (the whole line or row, ASCII labels, the values below); then every value in it is compared
# exactly with the data. Anything that does not match its form is prose: it earns nothing (the one use the check makes
# of a prose sentence: it counts as its section's content, whatever it says, for the sections part below), and your
# instructor or the reviewer reads it. Elements count in the note's top-level Markdown as it renders (paragraphs, list items, table
# rows; an HTML comment is not read at all). Inside raw HTML only a bare `<details>` fold (no attribute but `open`)
# and its bare `<summary>` count, and only for the performance table; an element with any attribute (`hidden`,
# `style`, `class`) or any other HTML hides what it holds, which earns nothing. Headings, block quotes, code and
# struck text earn nothing. An element a reader might not see that matches its form is still held to the data. A
# labelled line is a line of a paragraph or list item that opens with its ASCII label and a colon (the label may be
# bold or in backticks): `Environment:`, `Scope:`, `Outcomes:`, `Timer:`, `Warm-up:`, `Synchronization:`,
# `Statistic:`, `Spread:`, `Raw samples:` or a case id; it runs to the next labelled line or the end of its paragraph.
# A label or case id that reads as one only with characters outside ASCII (a lookalike letter, a format character) is
# reported as disguised and loses the consistency part. On every judged note the feedback says that prose (every
# paragraph, list item, sentence or row that is not an element in its form) is read by your instructor or the
# reviewer, not scored; a line that looks like an element but does not match its form is named, with its form. The
# forms (an example of each is in the next cell):
#
# * the sections: six headings, each exactly one section name: **Summary**, **Eligibility and fallback**, **Semantic
#   evidence**, **Mechanism**, **Performance**, **Limitations**, each with a sentence of its own (5 words or more,
#   said in no other section), a labelled line or a table row; a section runs to the next heading of the same or a
#   higher level;
# * the environment (part environment_and_scope): `Environment: DEVICE, torch X, triton Y, KIND` (`Environment:
#   synthetic GPU (teaching data), torch 2.13.0+cpu, triton 3.8.0, synthetic`): the device as recorded
#   (`env["device_name"]`, else `env["device"]`; any case), each version exactly as recorded, and KIND exactly one of
#   `GPU measurement`, `synthetic` (on synthetic data) or `not a GPU measurement` (on data whose `env["device"]` is
#   not `"cuda"`), the data's;
# * the scope (part environment_and_scope): `Scope: DTYPES inputs of at most N columns; every other call runs
#   F.rms_norm` (`Scope: fp16, bf16 and fp32 inputs of at most 16384 columns; every other call runs F.rms_norm`):
#   DTYPES exactly the predicate's `SUPPORTED_DTYPES` (float16, bfloat16, float32, by any of their usual names: fp16,
#   float16, half, torch.float16...), N exactly `MAX_COLS` (`16384`, `16,384` or `MAX_COLS = 16384`);
# * the outcomes (part consistent_with_data): `Outcomes: N win, N neutral, N loss, N fallback` under the **Summary**
#   heading (`Outcomes: 4 win, 2 neutral, 1 loss, 3 fallback`): each class exactly once, in any order, singular or
#   plural, parted by `,`, `;` or `and`, nothing else on the line; each count the data's;
# * the case lines (part consistent_with_data): a case line for each loss and each neutral case, `- CASE: CLASS,
#   BASELINE -> CANDIDATE UNIT` with an optional `(CHANGE %)` (`- c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)`):
#   the class the data's (on CPU data `unmeasured`), the unit `us`, `µs` or `ms`, nothing else on the line; a figure
#   (a median in a case line or a table row, or a change in percent) must equal the data's rounded to the digits
#   written, with at least 2 significant digits written (`9.8`, `0.21`, `210`; `0` or `9` is no figure);
# * the performance table (part consistent_with_data): the performance table under the **Performance** heading (open,
#   or folded in a bare `<details>`): the header `| case | route | baseline us | candidate us | class |` (extra
#   columns after these five are not read), one row per case id, its route exactly `triton` or `fallback`, its figures
#   and its class the data's; every visible row whose first cell is a case id is held: its `route`, `class`, `outcome`
#   and `verdict` cells (any column so headed) and, under this header, its figures; any other row is prose; every
#   element that matches its form is held to the data, duplicates too (two `Outcomes:` lines, two case lines for a
#   case, two tables): a false one loses; on synthetic data an `Environment:` line in its form says `synthetic`;
# * prose (part consistent_with_data): one rule reads prose: a sentence that denies every loss (a loss word, `slower`,
#   `loss`, `regression`, `worse`, negated by `never`, `no`, `none`, `nothing`, `without`, `zero`, `0`, `not a single`
#   or `not one` in one clause: `no regressions`, `slower on no shape`) while the table has losses loses the
#   consistency part, unless the sentence names a case, a route (`fallback`, `triton`) or an exception (`except`,
#   `other than`);
# * the method (part measurement_method): six labelled lines with the values of `env["harness"]`: `Timer: NAME` (the
#   record's timer), `Warm-up: N ms`, `Synchronization: HOW` (copy the record's own words: a program cannot judge
#   other words), `Statistic: median of N samples`, `Spread: q80 - q20` (or `p80 - p20`, `20th to 80th percentile`),
#   `Raw samples: FILE`;
# * no claims from CPU data (part no_claims_from_cpu_data): on data whose `env["device"]` is not `"cuda"`: an
#   `Environment:` line whose KIND is `not a GPU measurement`, and no case line, table row or `Outcomes:` count marks
#   a case a win or a loss (a class, `faster`, `slower`, or a multiplier such as `2.0x`, in any line labelled with a
#   case id or any row whose first cell is one, its table header too,
#   wherever it stands);
# * concision (part concise): at most 600 words a reader sees: outside closed `<details>` blocks (words inside
#   `<details open>` count): keep the summary, the scope, the counts and the claim in sight, and fold the full table
#   in `<details><summary>...</summary> ... </details>` (leave a blank line after `<summary>` so the Markdown inside
#   renders). When a note is too long, the feedback gives each note's word count.
#
# Every part is judged only on a note with substance, on each table: case lines or performance table rows that give at
# least 2 of the table's cases figures that match the data (on the CPU-shaped table too). A skeleton of headings, a
# project's PR template left unfilled, or lines of filler and keywords score nothing.
#
# Write the note yourself: a `write_pr_note` that calls the kit's benchmark code (`fastpath_lib.bench`, which writes
# the kit's own PR note), the grader's check (`fastpath_lib.grading.checks.ex07_note`) or its reading of a note
# (`fastpath_lib.grading.rules.ex07_claims`, `fastpath_lib.grading.rules.rendered`,
# `fastpath_lib.grading.rules.ex07_forms`) fails every part. What the exercise hands you is yours to call:
# `ex.expected_classes` (exercise 06's rule), `ex.synthetic_results` and `ex.synthetic_environment`.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints each part `passed`, or what it found wrong.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

# %% [markdown]
# The elements in their forms, on the fixed table (a note has prose around them, for a person):
#
# ```text
# ## Summary
# Environment: synthetic GPU (teaching data), torch 2.13.0+cpu, triton 3.8.0, synthetic
# Outcomes: 3 win, 4 neutral, 2 loss, 3 fallback
# - c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)
# Scope: fp16, bf16 and fp32 inputs of at most 16384 columns; every other call runs F.rms_norm
# ## Eligibility and fallback
# ## Semantic evidence
# ## Mechanism
# ## Performance
# | case | route | baseline us | candidate us | class |
# |---|---|---|---|---|
# | c05_1024x128_fp16 | triton | 9.0 | 9.8 | loss |
# - Timer: triton.testing.do_bench
# - Warm-up: 50 ms
# - Synchronization: the device is synchronized before each timing is read (CUDA events)
# - Statistic: median of 100 samples
# - Spread: q80 - q20
# - Raw samples: raw_samples.csv
# ## Limitations
# ```
#
# On the CPU-shaped table: `Environment: cpu, torch 2.13.0+cpu, triton 3.8.0, not a GPU measurement`, and each case
# line and table row gives the class `unmeasured` (`- c01_4096x4096_bf16: unmeasured, 210.0 -> 105.0 us`).

# %%
import torch
import fastpath_lib
# no CUDA: run the kernels in Triton's CPU interpreter (a no-op on a GPU)
fastpath_lib.use_interpreter()
from fastpath_lib import exercises as ex
from fastpath_lib.cases import CaseSpec
from fastpath_lib.rmsnorm.predicate import MAX_COLS
results, env = ex.synthetic_results(), ex.synthetic_environment()
classes = ex.expected_classes(results)  # exercise 06's rule, given: the kit's own classification
env


# %%
def write_pr_note(results, env) -> str:
    """Return the PR note as one markdown str."""
    # BEGIN SOLUTION
    gpu = env.get("device") == "cuda"
    classes = ex.expected_classes(results) if gpu else {c: "unmeasured" for c in results["case_id"]}
    rows = {r["case_id"]: r for _, r in results.iterrows()}
    kind = "not a GPU measurement" if not gpu else "synthetic" if env.get("synthetic") else "GPU measurement"

    def case_line(cid):  # `- CASE: CLASS, BASELINE -> CANDIDATE us (CHANGE %)`, figures rounded as written
        b, c = rows[cid]["baseline_median_us"], rows[cid]["candidate_median_us"]
        return f"- {cid}: {classes[cid]}, {b:.1f} -> {c:.1f} us ({100 * (c / b - 1):+.1f} %)"

    lines = ["## Summary",
             "A Triton RMSNorm fast path behind an eligibility predicate; F.rms_norm is the fallback.", "",
             f"Environment: {env.get('device_name') or env.get('device')}, torch {env.get('torch')}, "
             f"triton {env.get('triton')}, {kind}", ""]
    if gpu:
        ids = {k: [c for c, v in classes.items() if v == k] for k in ("win", "neutral", "loss", "fallback")}
        lines += [f"Outcomes: {len(ids['win'])} win, {len(ids['neutral'])} neutral, {len(ids['loss'])} loss, "
                  f"{len(ids['fallback'])} fallback", ""]
        lines += [case_line(c) for k in ("loss", "neutral") for c in ids[k]]
    else:
        lines.append("These timings come from the CPU interpreter; they say nothing about a GPU.")
        lines += ["", *(case_line(c) for c in rows)]
    lines += ["", f"Scope: fp16, bf16 and fp32 inputs of at most {MAX_COLS} columns; every other call runs F.rms_norm",
              "", "## Eligibility and fallback",
              "Every ineligible call (another dtype, wider rows, a strided or misaligned layout) runs F.rms_norm.",
              "", "## Semantic evidence", "Both routes match the float64 reference within the tolerance table.",
              "", "## Mechanism", "One read and one write of each row; one launch per call.", "",
              "## Performance", f"{len(results)} cases; every one in the table below.", "",
              "<details><summary>Every case</summary>", "",
              "| case | route | baseline us | candidate us | class |", "|---|---|---|---|---|"]
    for _, r in results.iterrows():
        lines.append(f"| {r['case_id']} | {r['route']} | {r['baseline_median_us']:.1f} | "
                     f"{r['candidate_median_us']:.1f} | {classes[r['case_id']]} |")
    lines += ["", "</details>"]
    h = env["harness"]
    lines += ["", "## Method", "", f"- Timer: {h['timer']}", f"- Warm-up: {h['warmup_ms']} ms",
              f"- Synchronization: {h['sync']}", f"- Statistic: {h['statistic']} of {h['samples']} samples",
              f"- Spread: {h['spread']}", f"- Raw samples: {h['raw_samples']}"]
    lines += ["", "## Limitations", "Synthetic teaching data stands in for a GPU run here."]
    return "\n".join(lines)
    # END SOLUTION


# %% tags=["grader-check"]
ex.check_pr_note(write_pr_note)

# %% [markdown]
# ## Questions
#
# 1. Why must the table list the neutral and losing cases, not only the wins?
# 2. What should a note say about interpreter timings, and what must it never say?
