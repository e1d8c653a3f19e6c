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
# Write a function that turns a results table and its environment record into the PR note of lesson 07. The
# check calls it three times: on the synthetic GPU-shaped table of exercise 06 (the environment says it is
# synthetic), on a GPU-shaped table it draws at random (new case ids and numbers: write from the data, not for one
# table), and on a CPU-interpreter-shaped table. It grades the note's headings, its performance table and its labelled
# lines, each held against the table and the environment record it was given; the rest is for a person to read.
#
# **How the note is graded.** The autograder scores only what a program can decide: the note's headings, its
# performance table and its labelled lines, each in the form below. Every other paragraph, list item or sentence is
# prose: your instructor or the reviewer reads it, and it is not scored. Prose loses points in two cases only: a
# sentence that denies every loss while the table has losses, and, on CPU data, a speed-up claimed (both below); on
# every judged note the feedback says that prose (every paragraph, list item or sentence that is not a labelled line or
# a table row) is read by your instructor or the reviewer, not scored. Where an element is missing or malformed, the
# feedback names it and shows its form. The elements that earn points, in short (the rules follow):

# %% [markdown]
# ```text
# ## Summary                                              the six headings: Summary, Eligibility and fallback,
#                                                         Semantic evidence, Mechanism, Performance, Limitations
# Environment: DEVICE, torch X, triton Y
# Outcomes: 4 win, 2 neutral, 1 loss, 3 fallback          (under Summary)
# - c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)       (one per loss and per neutral case)
# Scope: fp16, bf16 and fp32 inputs of at most 16384 columns; every other call runs the fallback, F.rms_norm.
# | case | route | baseline us | candidate us | class |  (under Performance: one row per case)
# - Timer: NAME
# - Warm-up: N ms
# - Synchronization: HOW
# - Statistic: median of N samples
# - Spread: q80 - q20
# - Raw samples: FILE
# ```
#
# A labelled line is a paragraph, a list item or a line of one that opens with its label and a colon (`Timer: ...`, `-
# c05_1024x128_fp16: loss, ...`; the label may be bold or in backticks); it runs to the next labelled line or the end
# of its paragraph or list item. Labels: `Environment`, `Scope`, `Outcomes`, `Timer`, `Warm-up`, `Synchronization`,
# `Statistic`, `Spread`, `Raw samples` and a case id of the table; a line with any other label is prose. The note is
# read as it renders (Markdown, as GitHub and JupyterLab show it): an HTML comment (`<!-- ... -->`, on one line or
# many) is not read at all, HTML tags are read as spaces, and headings, paragraphs, list items and table rows are read
# where Markdown renders them. A labelled line or table row a reader might not see as the note's own plain text (inside
# raw HTML other than a `<details>` fold, struck through, in a block quote, a code block or a heading) is held to the
# data but earns nothing. Case ids are compared after removing zero-width and other format characters, NFKC
# normalisation and reading Cyrillic and Greek lookalike letters as Latin; a case id written with such characters is
# reported. In a labelled line or a table row, a figure is a number with a unit (`us`, `µs`, `ms`, `x`, `×` or `%`, or
# the unit's name: `microseconds`, `percent`), or paired with one (`9.0 -> 9.8 us`); after a bound or an approximation
# (`under 10 %`, `about 9 us`) it is none; a case's figures are its medians, its spreads and the difference of its
# medians (in µs or ms), their ratio either way, the change either way (as a fraction or in percent) and each spread as
# a share of its median, to within one unit of the last digit written (a number in a case's table row may also be its
# shape, the sample count, the warm-up, the spread's quantiles or `MAX_COLS`).
#
# Every part is judged only on a note with substance, on each table: case lines that give at least 2 of the table's
# cases a figure of their own (on the CPU-shaped table too, where a case line may leave its class out: `-
# c01_4096x4096_bf16: 210 -> 105 us`). A skeleton of headings, a project's PR template left unfilled, or lines of
# filler and keywords score nothing. Then the check looks for
#
# * the sections, as Markdown headings, each with a sentence of its own (5 words or more, said in no other section), a
#   labelled line or a table row: **Summary**, **Eligibility and fallback**, **Semantic evidence**, **Mechanism**,
#   **Performance**, **Limitations**; a section runs from its heading to the next heading of the same or a higher
#   level: a `###` subheading inside `## Performance` is part of it;
# * the environment, `Environment: DEVICE, torch X, triton Y`: the device (`env["device_name"]`, or `env["device"]`
#   where no name is recorded) and each version after its name (`torch 2.5.1`, `triton==3.1.0`) (the keys of the
#   environment record lessons 05 and 07 show), and a **scope** statement (a `Scope:` line, which may wrap over several
#   lines and ends at a blank line, a heading, a list or another labelled line, or a `## Scope` section): which calls
#   take the fast path, with the column limit as a bound on columns (`at most 16384 columns`, `cols <= 16384`, `the
#   16384-column limit`), which is `fastpath_lib.rmsnorm.predicate.MAX_COLS` (a case of the table that takes the Triton
#   route with more columns contradicts a smaller limit; every bound on columns in the scope, `above 4096 columns` too,
#   is read as a column limit), each dtype the fast path covers (float16, bfloat16 and float32: the predicate's
#   `SUPPORTED_DTYPES`), by any of its usual names (`fp16`, `float16`, `half`), and a sentence that says where the
#   other calls go, the fallback, in any words (`fallback`, `falls back` or `F.rms_norm`: `calls that are not eligible
#   run F.rms_norm`); another torch or triton version in an `Environment:` line contradicts the record;
# * a note consistent with the data: a performance table with one row per case id (first cell), its route (the cell
#   under a `route` header, else the first cell that is `triton` or `fallback`) and its class
#   (win/neutral/loss/fallback, as in exercise 06: the first word of the cell under a `class`, `outcome` or `verdict`
#   header, else of the first cell that opens with a class name: `win (1.34x)` is a win); a case's row is its row under
#   the **Performance** heading, else its first row anywhere; every other table row that names a case, anywhere in the
#   note, is a claim too: its route, its class and every figure in it (`1.50x`, `9.8 us`, or a bare number) are held to
#   the data; the table is folded in `<details>` there, or open; `Outcomes: 4 win, 2 neutral, 1 loss, 3 fallback` under
#   the **Summary** heading: `N CLASS` for each class the table has (win, neutral, loss, fallback, plural or not),
#   parted by `,`, `;` or `and`, each count the data's; a case line for each loss and each neutral case, `-
#   c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)`: the case id as its label, its class first, then at least one
#   figure of its own (any case may have one; every class and figure in a case line is held to the data; its other
#   words are a comment for the reader, and only their figures are read); on synthetic data the `Environment:` line
#   says `synthetic`; and one rule read in prose: a sentence that says nothing is slower (a loss word after a word that
#   denies every one, in one clause: `never slower`, `nothing is slower`, `no regressions`, `without losses`, `no shape
#   got worse`; or a win word said of every case: `always faster`, `beats it on every shape`, `improves on it
#   everywhere`, `all cases win`) while the table has losses, unless the same sentence names a case or its exceptions
#   (`except`, `but`, `other than`, `elsewhere`) loses this part (on the CPU-shaped data only the figures are held to
#   the data; its outcomes are the CPU rule's, below);
# * how the numbers were measured: six labelled lines with the values of `env["harness"]`: `Timer: NAME`, `Warm-up: N
#   ms`, `Synchronization: HOW` (in any words: synchronized, waits for the kernel, CUDA events, or the record's own),
#   `Statistic: median of N samples`, `Spread: q80 - q20` (or `20th to 80th percentile`) and `Raw samples: FILE`;
#   another warm-up or sample count in such a line contradicts the record;
# * on data whose `env["device"]` is not `"cuda"` (the CPU-interpreter-shaped table): the `Environment:` line says `not
#   a GPU measurement`, and no speed-up is claimed anywhere, in prose, a labelled line or a table row (its header too):
#   a multiplier (`1.5x`, `0.92x`) or a speed word (`faster`, `speed-up`) unless its sentence negates it or makes it
#   conditional (`no speed-up is claimed` is fine); no case line, table row or `Outcomes:` count marks a case a win or
#   a loss (a table cell in any words of one: `win (interpreter)`, `faster`, `slower`).
# * concision: at most 600 words outside `<details>` blocks (the kit's rule for its own notes): keep the summary, the
#   scope, the counts and the claim in sight, and fold full tables in `<details><summary>...</summary> ... </details>`
#   (leave a blank line after `<summary>` so the Markdown inside renders). When a note is too long, the feedback gives
#   each note's word count.
#
# Write the note yourself: a `write_pr_note` that calls the kit's benchmark code (`fastpath_lib.bench`, which writes the
# kit's own PR note), the grader's check (`fastpath_lib.grading.checks.ex07_note`) or its reading of a note
# (`fastpath_lib.grading.rules.ex07_claims`, `fastpath_lib.grading.rules.rendered`,
# `fastpath_lib.grading.rules.ex07_tables`, `fastpath_lib.grading.rules.ex07_labels`) fails every part. What the exercise hands you is yours to call:
# `ex.expected_classes` (exercise 06's rule), `ex.synthetic_results` and `ex.synthetic_environment`.
#
# **How this works.** Fill in each cell marked `# FILL ME IN (roughly N lines)` (delete the `raise
# NotImplementedError`), run it, then run the check below it: it prints each part `passed`, or what it found wrong.
# `python -m fastpath_lib grade exercises/` runs all notebooks in a fresh kernel and prints your score; the solved
# versions are in `solutions/`.

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
