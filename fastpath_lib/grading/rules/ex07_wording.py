"""Exercise 07: the rules its check holds a PR note to, in the exercise's words (each refusal quotes the rule it
applies, and the exercise states every one: ``tests/course/test_exercise_instructions.py``)."""

from __future__ import annotations

from fastpath_lib.bench.schema import GPU_LABEL, NOT_GPU, SYNTHETIC_LABEL, UNMEASURED
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, WIN
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["STATED", "NAMED_WITH_FIGURES", "COVERED", "PROSE_NOTE", "KINDS", "SYNTHETIC"]

#: How few cases a note gives figures of their own (case lines or performance table rows), on each table, and still
#: has substance.
NAMED_WITH_FIGURES = 2
#: The word that names synthetic data in an ``Environment:`` line (the schema's label, its first word).
SYNTHETIC = SYNTHETIC_LABEL.split()[0].lower()
#: The kinds an ``Environment:`` line may end with (the schema's labels).
KINDS = (GPU_LABEL, SYNTHETIC, NOT_GPU)
COVERED = [str(d).replace("torch.", "") for d in rms.SUPPORTED_DTYPES]
PRINCIPLE = ("The autograder scores only structured elements, each counted only where it matches its stated form "
             "exactly (the whole line or row, ASCII labels, the values below); then every value in it is compared "
             "exactly with the data. Anything that does not match its form is prose: it earns nothing (the one use "
             "the check makes of a prose sentence: it counts as its section's content, whatever it says, for the "
             "sections part below), and your instructor or the reviewer reads it")
WHERE_RULE = ("Elements count in the note's top-level Markdown as it renders (paragraphs, list items, table rows; an "
              "HTML comment is not read at all). Inside raw HTML only a bare `<details>` fold (no attribute but "
              "`open`) and its bare `<summary>` count, and only for the performance table; an element with any "
              "attribute (`hidden`, `style`, `class`) or any other HTML hides what it holds, which earns nothing. "
              "Headings, block quotes, code and struck text earn nothing. An element a reader might not see that "
              "matches its form is still held to the data")
LABEL_RULE = ("A labelled line is a line of a paragraph or list item that opens with its ASCII label and a colon (the "
              "label may be bold or in backticks): `Environment:`, `Scope:`, `Outcomes:`, `Timer:`, `Warm-up:`, "
              "`Synchronization:`, `Statistic:`, `Spread:`, `Raw samples:` or a case id; it runs to the next "
              "labelled line or the end of its paragraph. A label or case id that reads as one only with characters "
              "outside ASCII (a lookalike letter, a format character) is reported as disguised and loses the "
              "consistency part")
ENVIRONMENT_RULE = (f"`Environment: DEVICE, torch X, triton Y, KIND` (`Environment: synthetic GPU (teaching data), "
                    f"torch 2.13.0+cpu, triton 3.8.0, {SYNTHETIC}`): the device as recorded (`env[\"device_name\"]`, "
                    f"else `env[\"device\"]`; any case), each version exactly as recorded, and KIND exactly one of "
                    f"`{GPU_LABEL}`, `{SYNTHETIC}` (on synthetic data) or `{NOT_GPU}` (on data whose "
                    f"`env[\"device\"]` is not `\"cuda\"`), the data's")
SCOPE_RULE = (f"`Scope: DTYPES inputs of at most N columns; every other call runs F.rms_norm` (`Scope: fp16, bf16 and "
              f"fp32 inputs of at most {rms.MAX_COLS} columns; every other call runs F.rms_norm`): DTYPES exactly the "
              f"predicate's `SUPPORTED_DTYPES` ({', '.join(COVERED)}, by any of their usual names: fp16, float16, "
              f"half, torch.float16...), N exactly `MAX_COLS` (`{rms.MAX_COLS}`, `{rms.MAX_COLS:,}` or "
              f"`MAX_COLS = {rms.MAX_COLS}`)")
OUTCOMES_RULE = (f"`Outcomes: N {WIN}, N {NEUTRAL}, N {LOSS}, N {FALLBACK}` under the **Summary** heading "
                 f"(`Outcomes: 4 {WIN}, 2 {NEUTRAL}, 1 {LOSS}, 3 {FALLBACK}`): each class exactly once, in any "
                 "order, singular or plural, parted by `,`, `;` or `and`, nothing else on the line; each count "
                 "the data's")
CASE_RULE = (f"a case line for each {LOSS} and each {NEUTRAL} case, `- CASE: CLASS, BASELINE -> CANDIDATE UNIT` "
             f"with an optional `(CHANGE %)` (`- c05_1024x128_fp16: {LOSS}, 9.0 -> 9.8 us (+8.9 %)`): the class "
             f"the data's (on CPU data `{UNMEASURED}`), the unit `us`, `µs` or `ms`, nothing else on the line")
FIGURE_RULE = ("a figure (a median in a case line or a table row, or a change in percent) must equal the data's "
               "rounded to the digits written, with at least 2 significant digits written (`9.8`, `0.21`, `210`; "
               "`0` or `9` is no figure)")
TABLE_RULE = ("the performance table under the **Performance** heading (open, or folded in a bare `<details>`): the "
              "header `| case | route | baseline us | candidate us | class |` (extra columns after these five are "
              "not read), one row per case id, its route exactly `triton` or `fallback`, its figures and its class "
              "the data's; every visible row whose first cell is a case id is held: its `route`, `class`, `outcome` "
              "and `verdict` cells (any column so headed) and, under this header, its figures; any other row is prose")
DUPLICATE_RULE = ("every element that matches its form is held to the data, duplicates too (two `Outcomes:` lines, two "
                  "case lines for a case, two tables): a false one loses")
METHOD_RULE = ("six labelled lines with the values of `env[\"harness\"]`: `Timer: NAME` (the record's timer), "
               "`Warm-up: N ms`, `Synchronization: HOW` (copy the record's own words: a program cannot judge other "
               "words), `Statistic: median of N samples`, `Spread: q80 - q20` (or `p80 - p20`, `20th to 80th "
               "percentile`), `Raw samples: FILE`")
SUBSTANCE_RULE = (f"case lines or performance table rows that give at least {NAMED_WITH_FIGURES} of the table's cases "
                  "figures that match the data (on the CPU-shaped table too)")
SECTION_RULE = ("six headings, each exactly one section name: **Summary**, **Eligibility and fallback**, **Semantic "
                "evidence**, **Mechanism**, **Performance**, **Limitations**, each with a sentence of its own (5 words "
                "or more, said in no other section), a labelled line or a table row; a section runs to the next "
                "heading of the same or a higher level")
NO_LOSS_RULE = ("one rule reads prose: a sentence that denies every loss (a loss word, `slower`, `loss`, `regression`, "
                "`worse`, negated by `never`, `no`, `none`, `nothing`, `without`, `zero`, `0`, `not a single` or `not "
                "one` in one clause: `no regressions`, `slower on no shape`) while the table has losses loses the "
                "consistency part, unless the sentence names a case, a route (`fallback`, `triton`) or an exception "
                "(`except`, `other than`)")
CPU_RULE = (f"on data whose `env[\"device\"]` is not `\"cuda\"`: an `Environment:` line whose KIND is `{NOT_GPU}`, and "
            f"no case line, table row or `Outcomes:` count marks a case a {WIN} or a {LOSS} (a class, `faster`, "
            "`slower`, or a multiplier such as `2.0x`, in any line labelled with a case id or any row whose first "
            "cell is one, its table header too, wherever it stands)")
CONCISE_RULE = ("at most 600 words a reader sees: outside closed `<details>` blocks (words inside `<details open>` "
                "count)")
#: What the feedback says of prose, on every judged note.
PROSE_NOTE = ("prose (every paragraph, list item, sentence or row that is not an element in its form) is read by your "
              "instructor or the reviewer, not scored")
STATED = (PRINCIPLE, WHERE_RULE, LABEL_RULE, ENVIRONMENT_RULE, SCOPE_RULE, OUTCOMES_RULE, CASE_RULE, FIGURE_RULE,
          TABLE_RULE, DUPLICATE_RULE, METHOD_RULE, SUBSTANCE_RULE, SECTION_RULE, NO_LOSS_RULE, CPU_RULE,
          CONCISE_RULE, PROSE_NOTE)
