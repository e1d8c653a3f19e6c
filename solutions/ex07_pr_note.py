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
# table), and on a CPU-interpreter-shaped table. It grades the note by what it asserts, each assertion held against
# the table and the environment record it was given: a keyword, a count of words or a sentence tied to no case and no
# figure earns nothing.
#
# **How the note is read.** The note is read as it renders (Markdown, as GitHub and JupyterLab show it): an HTML comment
# (`<!-- ... -->`, on one line or many) is not read at all, HTML tags are read as spaces, and headings, paragraphs,
# list items and table rows are read where Markdown renders them. **Text a reader might not see as the note's own plain
# statement can lose points but never earn them**: anything inside raw HTML (a block or an inline element, `<div
# hidden>`, `<span>`, `<del>`; a `<details>` fold and its `<summary>` excepted: a reader opens it), struck-through text
# (`~~...~~`), headings, block quotes and code blocks are checked against the data (a false outcome or figure there is
# an inconsistency) but never count toward a required claim, a count, a named loss or neutral case, the sections, the
# scope or the method. Case ids are compared after removing zero-width and other format characters, NFKC normalisation
# and reading Cyrillic and Greek lookalike letters as Latin; a case id written with such characters is reported. Its prose
# (paragraphs and list items, each read whole over the lines it wraps onto; headings and table rows are not prose) is
# read sentence by sentence, everywhere, and a case is named by its case id. In it, a number with a unit (`us`, `µs`,
# `ms`, `x`, `×` or `%`, or the unit's name: `microseconds`, `percent`), or paired with one (`9.0 vs 9.8 us`), after a
# case id and before the next case id, a `;` or the end of its sentence is a figure of that case (after a bound or an
# approximation, `under 10 %`, `about 9 us`, it is none); after a list of case ids, figures given `respectively` go to
# the cases in order (`c05 and c12 are slower (9 -> 9.8 us and 40 -> 47 us, respectively)`), and it must be one of the
# case's figures: its medians, its spreads and the difference of its medians (in µs or ms), their ratio either way, the
# change either way (as a fraction or in percent) and each spread as a share of its median, to within one unit of the
# last digit written (the warm-up and the spread's quantiles may stand beside a case too; a number in a case's table row
# must be one of its figures, its shape, the sample count, the warm-up or `MAX_COLS`). A sentence that names cases
# claims an outcome for them by its words, in any of their forms (`tied`, `won`, `losses`): neutral (`neutral`;
# `within`, `inside`, `in`, `under` or `below` the noise or its spread, a word between or not: `inside its measured
# spread`; the noise `swallows`, `covers`, `hides`, `dominates` or `exceeds` it, or `is wider than` it; `no difference`
# or `no change`, up to two words between: `no significant speed difference`; `not significant`, `insignificant`, `on
# par`, `unchanged`, `indistinguishable`, `ties`) if it says so, else the one outcome its words name, a comparison
# included: win (`faster`, `quicker`, `wins`, `speed-up`, `speeds up`, `beats`, `outperforms`, `improves`, `gains`,
# `better`, `ahead`), loss (`slower`, `loses`, `loss`, `regression`, `slowdown`, `worse`, `worsens`, `underperforms`,
# `trails`, `lags`, `behind`, `degrades`) or fallback (`falls back`, `fell back`, `fallback`), where the noun `fallback`
# after `the`, `its`, `their`, `than`, `vs` or `against` is the route, no outcome (`slower than the fallback` is a loss,
# `the fallback cases` name the outcome); only an affirmed word claims: a word its clause negates or makes modal,
# wherever in the clause (`not slower`, `hardly faster`, `is not, whatever the table suggests, slower`, `would be
# faster`, `was expected to be faster`, `failed to win`; an opening phrase without a verb of its own, `as expected,`, is
# not part of the clause), a word its sentence denies or supposes anywhere before it (`it is a myth that`, `untrue`,
# `false`, `we deny that`, `if`, `whether`, `perhaps`, `possibly`) or right after it (`slower if the cache is cold`),
# and a word in a question (`faster?`) claims nothing, and the feedback asks you to state it affirmatively; a note that
# denies the outcome the data gives a case (`it is a myth that c05 is slower`) contradicts the data, and a part that
# asserts two outcomes for a case claims both; a sentence whose words name two outcomes is read in parts, cut before
# each outcome word, a noise phrase too, that follows a comma, a `;`, `and`, `but`, `while` or `whereas` (case ids,
# parentheses and words such as `is` may stand between): `c01 wins, while c05 and c12 lose`, `c01 wins, while c03 is
# within the noise`; a part that names no case belongs to the part before (`c03 is 1 % faster, within the noise` is
# neutral), or where it opens the sentence to the part after (`within the noise, c03 is faster`), and where it cannot be
# cut it claims nothing. A number bound to an outcome word (any word above, `cases` or `of the cases` between them or
# not) is a count, the number first (`4 wins`, `3 faster cases`, `3 cases are faster`, `3 are faster`) or the outcome
# first (`wins on 4 cases`, `wins 3 cases`, `faster in 3 cases`, `within the noise on 4`), `no wins` counts none where
# nothing restricts it (`no regression elsewhere` counts nothing), each only where its sentence asserts it; a number
# bound to another noun (`two fallback runs`, `faster on 2 rows`, `loses 1 µs`) counts no cases. A list item is a
# sentence too: `- Warm-up: 50 ms` states the warm-up. A wrong count is quoted with the sentence it was read from, and
# where the summary gives no count or claim for an outcome, the feedback lists each of its sentences with what it took
# from it.
#
# Every part is judged only on a note with substance, on each table: sentences (outside tables) that name at least 2 of
# the table's cases, each with a figure of its own. A skeleton of headings, a project's PR template left unfilled, or
# lines of filler and keywords score nothing. Then the check looks for
#
# * the sections, as Markdown headings, each with a sentence of its own (5 words or more, said in no other section):
#   **Summary**, **Eligibility and fallback**, **Semantic evidence**, **Mechanism**, **Performance**, **Limitations**; a
#   section runs from its heading to the next heading of the same or a higher level: a `###` subheading inside `##
#   Performance` is part of it;
# * the environment (`env["device_name"]`, or `env["device"]` where no name is recorded, `env["torch"]`,
#   `env["triton"]`: the keys of the environment record lessons 05 and 07 show; each version after its name (`torch
#   2.5.1`, `triton==3.1.0`)) and a **scope** statement (a `## Scope` section, or a `Scope:` paragraph, which may wrap
#   over several lines and ends at a blank line, a heading, a list or another `Label:`): which calls take the fast path,
#   with the column limit as a bound on columns (`at most 16384 columns`, `cols <= 16384`, `the 16384-column limit`),
#   which is `fastpath_lib.rmsnorm.predicate.MAX_COLS` (a case of the table that takes the Triton route with more
#   columns contradicts a smaller limit; every bound on columns in the scope, `above 4096 columns` too, is read as a
#   column limit), each dtype the fast path covers (float16, bfloat16 and float32: the predicate's `SUPPORTED_DTYPES`),
#   by any of its usual names (`fp16`, `float16`, `half`), and a sentence that says where the other calls go, the
#   fallback, in any words (`fallback`, `falls back` or `F.rms_norm`: `calls that are not eligible run F.rms_norm`);
# * a note consistent with the data: a performance table with one row per case id (first cell), its route and its class
#   (win/neutral/loss/fallback, as in exercise 06), each cell read as a sentence is (`win (1.34x)` marks a win; no other
#   cell of the row may claim another outcome); a case's row is its row under the **Performance** heading, else its
#   first row anywhere; every other table row that names a case, anywhere in the note, is a claim too: its route, the
#   outcome its cells claim or deny and every figure in it (`1.50x faster`, `9.8 us`) are held to the data; the table is
#   folded in `<details>` there, or open, every case id appears under that heading, and route and class match the data;
#   every figure the note gives a case is that case's, every outcome it claims for a case is the case's class, and every
#   count is the data's; the **Summary** says, for each of win, neutral and loss that the table has, how many (a count)
#   or which cases (an outcome claim); each loss and each neutral case is named outside the table, in a sentence that
#   claims its outcome, with a figure of its own; the note says nowhere that nothing is slower (a loss word after a word
#   that denies every one, in one clause: `never slower`, `nothing is slower`, `no regressions`, `without losses`, `no
#   shape got worse`; or a win word said of every case: `always faster`, `beats it on every shape`, `improves on it
#   everywhere`, `all cases win`) while the table has losses, unless the same sentence names a case or its exceptions
#   (`except`, `but`, `other than`, `elsewhere`); and the note says the data is synthetic (on the CPU-shaped data only
#   the figures are held to the data; its outcomes are the CPU rule's, below);
# * how the numbers were measured, from `env["harness"]`: the timer, the warm-up (in ms), how the device is synchronized
#   before a timing is read (in any words: synchronized, waits for the kernel to finish, CUDA events, or the record's
#   own words), the statistic (the median of how many samples), its spread (q80 - q20) and where the raw samples are,
#   each in a sentence that states it: the timer in a sentence about timing, the warm-up as `a warm-up of N ms`, the
#   synchronization with what it guards (`synchronized before each timing is read`), the statistic with its sample count
#   (`the median of N samples`), the spread as a range of quantiles (`q80 - q20`, `20th to 80th percentile`) and the raw
#   samples' file with what it holds (`Raw samples: FILE`);
# * on data whose `env["device"]` is not `"cuda"` (the CPU-interpreter-shaped table): the words "not a GPU measurement"
#   (on one line or wrapped), no speed-up claimed, in a sentence or a table row (its header too): a multiplier (`1.5x`,
#   `0.92x`) or a speed word (`faster`, `speed-up`), unless its sentence negates it or makes it conditional (an honest
#   "no speed-up is claimed" is fine), and no case marked or called a win or a loss (a table cell is read as a sentence
#   is: `win (interpreter)` marks a win; a class such as `not measured` marks none).
# * concision: at most 600 words outside `<details>` blocks (the kit's rule for its own notes): keep the summary, the
#   scope, the counts and the claim in sight, and fold full tables in `<details><summary>...</summary> ... </details>`
#   (leave a blank line after `<summary>` so the Markdown inside renders). When a note is too long, the feedback gives
#   each note's word count.
#
# Write the note yourself: a `write_pr_note` that calls the kit's benchmark code (`fastpath_lib.bench`, which writes the
# kit's own PR note), the grader's check (`fastpath_lib.grading.checks.ex07_note`) or its reading of a note
# (`fastpath_lib.grading.rules.ex07_claims`, `fastpath_lib.grading.rules.rendered`,
# `fastpath_lib.grading.rules.ex07_tables`) fails every part. What the exercise hands you is yours to call:
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
    classes = ex.expected_classes(results) if gpu else {c: "not measured" for c in results["case_id"]}
    rows = {r["case_id"]: r for _, r in results.iterrows()}

    def measured(cid):  # a case with its own numbers: both medians, and on a GPU the change in percent
        b, c = rows[cid]["baseline_median_us"], rows[cid]["candidate_median_us"]
        change = f", {100 * (c / b - 1):+.1f} %" if gpu else ""
        return f"{cid} ({b:.4g} -> {c:.4g} us{change})"

    lines = ["## Summary",
             "A Triton RMSNorm fast path behind an eligibility predicate; F.rms_norm is the fallback.",
             f"Data: {env.get('device_name') or env.get('device')}, torch {env.get('torch')}, triton {env.get('triton')}. {env.get('note', '')}"]
    if gpu:
        ids = {k: [c for c, v in classes.items() if v == k] for k in ("win", "neutral", "loss", "fallback")}
        lines.append(f"Of {len(results)} cases: {len(ids['win'])} wins, {len(ids['neutral'])} neutral, "
                     f"{len(ids['loss'])} losses, {len(ids['fallback'])} fallback.")
        for k, say in (("win", "win"), ("neutral", "neutral (within the noise)"), ("loss", "loss")):
            if ids[k]:
                lines.append(f"- {say}: {', '.join(measured(c) for c in ids[k])}")
        if ids["fallback"]:
            lines.append(f"- fallback (F.rms_norm on both sides): {', '.join(ids['fallback'])}")
    else:
        lines.append("These timings are not a GPU measurement; no speed-up is claimed from them.")
        lines += [f"- {measured(c)} under the interpreter" for c in rows]
    lines += ["", "## Scope",
              f"The fast path covers fp16, bf16 and fp32 inputs of at most {MAX_COLS} columns whose rows are "
              "contiguous and 16-byte aligned; every other call runs the fallback, F.rms_norm, unchanged.",
              "", "## Eligibility and fallback", "Every ineligible call runs F.rms_norm (see the predicate table).",
              "", "## Semantic evidence", "Both routes match the float64 reference within the tolerance table.",
              "", "## Mechanism", "One read and one write of each row; one launch per call.", "",
              "## Performance", f"{len(results)} cases; every one in the table below.", "",
              "<details><summary>Every case</summary>", "",
              "| case | route | baseline us | candidate us | class |", "|---|---|---|---|---|"]
    for _, r in results.iterrows():
        lines.append(f"| {r['case_id']} | {r['route']} | {r['baseline_median_us']} | "
                     f"{r['candidate_median_us']} | {classes[r['case_id']]} |")
    lines += ["", "</details>"]
    h = env["harness"]
    lines += ["", "## Method", f"Timer: {h['timer']}, after a warm-up of {h['warmup_ms']} ms.",
              f"Synchronization: {h['sync']}.",
              f"Each case gives the median of {h['samples']} samples; the spread is q80 - q20 (the 20-80 % range).",
              f"Raw samples: {h['raw_samples']}."]
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
