"""Exercise 07: the rules its check holds a PR note to, in the exercise's words (each refusal quotes the rule it
applies, and the exercise states every one: ``tests/course/test_exercise_instructions.py``)."""

from __future__ import annotations

from fastpath_lib.grading.vocabulary import NOT_GPU
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["STATED", "NAMED_WITH_FIGURES", "COVERED", "RENDER_RULE", "PROSE_NOTE"]

#: How few cases a note gives a figure of their own, on each table, and still has substance.
NAMED_WITH_FIGURES = 2
#: The rules a note is held to, in the exercise's words: each refusal quotes the rule it applies, and the exercise
#: states every one (``tests/course/test_exercise_instructions.py``).
PRINCIPLE = ("The autograder scores only what a program can decide: the note's headings, its performance table and "
             "its labelled lines, each in the form below. Every other paragraph, list item or sentence is prose: your "
             "instructor or the reviewer reads it, and it is not scored")
PROSE_RULE = ("Prose loses points in two cases only: a sentence that denies every loss while the table has losses, "
              "and, on CPU data, a speed-up claimed")
LABEL_RULE = ("A labelled line is a paragraph, a list item or a line of one that opens with its label and a colon "
              "(`Timer: ...`, `- c05_1024x128_fp16: loss, ...`; the label may be bold or in backticks); it runs to "
              "the next labelled line or the end of its paragraph or list item")
SUBSTANCE_RULE = (f"case lines that give at least {NAMED_WITH_FIGURES} of the table's cases a figure of their own "
                  "(on the CPU-shaped table too, where a case line may leave its class out: `- c01_4096x4096_bf16: "
                  "210 -> 105 us`)")
OUTLINE_RULE = ("a section runs from its heading to the next heading of the same or a higher level: a `###` "
                "subheading inside `## Performance` is part of it")
SECTION_RULE = "a sentence of its own (5 words or more, said in no other section), a labelled line or a table row"
ENVIRONMENT_RULE = ("`Environment: DEVICE, torch X, triton Y`: the device (`env[\"device_name\"]`, or "
                    "`env[\"device\"]` where no name is recorded) and each version after its name (`torch 2.5.1`, "
                    "`triton==3.1.0`)")
LIMIT_RULE = (f"the column limit as a bound on columns (`at most {rms.MAX_COLS} columns`, `cols <= {rms.MAX_COLS}`, "
              f"`the {rms.MAX_COLS}-column limit`)")
COVERED = [str(d).replace("torch.", "") for d in rms.SUPPORTED_DTYPES]
DTYPE_RULE = (f"each dtype the fast path covers ({', '.join(COVERED[:-1])} and {COVERED[-1]}: the predicate's "
              "`SUPPORTED_DTYPES`), by any of its usual names (`fp16`, `float16`, `half`)")
FALLBACK_RULE = ("a sentence that says where the other calls go, the fallback, in any words (`fallback`, `falls back` "
                 "or `F.rms_norm`: `calls that are not eligible run F.rms_norm`)")
OUTCOMES_RULE = ("`Outcomes: 4 win, 2 neutral, 1 loss, 3 fallback` under the **Summary** heading: `N CLASS` for each "
                 "class the table has (win, neutral, loss, fallback, plural or not), parted by `,`, `;` or `and`, each "
                 "count the data's")
CASE_RULE = ("a case line for each loss and each neutral case, `- c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)`: "
             "the case id as its label, its class first, then at least one figure of its own (any case may have one; "
             "every class and figure in a case line is held to the data; its other words are a comment for the "
             "reader, and only their figures are read)")
FIGURE_RULE = ("a figure is a number with a unit (`us`, `µs`, `ms`, `x`, `×` or `%`, or the unit's name: "
               "`microseconds`, `percent`), or paired with one (`9.0 -> 9.8 us`); after a bound or an approximation "
               "(`under 10 %`, `about 9 us`) it is none")
FIGURES_ARE = ("its medians, its spreads and the difference of its medians (in µs or ms), their ratio either way, the "
               "change either way (as a fraction or in percent) and each spread as a share of its median, to within "
               "one unit of the last digit written")
TABLE_RULE = ("a performance table with one row per case id (first cell), its route (the cell under a `route` header, "
              "else the first cell that is `triton` or `fallback`) and its class (win/neutral/loss/fallback, as in "
              "exercise 06: the first word of the cell under a `class`, `outcome` or `verdict` header, else of the "
              "first cell that opens with a class name: `win (1.34x)` is a win); a case's row is its row under the "
              "**Performance** heading, else its first row anywhere; every other table row that names a case, "
              "anywhere in the note, is a claim too: its route, its class and every figure in it (`1.50x`, `9.8 us`, "
              "or a bare number) are held to the data")
NO_LOSS_RULE = ("a sentence that says nothing is slower (a loss word after a word that denies every one, in one "
                "clause: `never slower`, `nothing is slower`, `no regressions`, `without losses`, `no shape got "
                "worse`; or a win word said of every case: `always faster`, `beats it on every shape`, `improves on "
                "it everywhere`, `all cases win`) while the table has losses, unless the same sentence names a case or "
                "its exceptions (`except`, `but`, `other than`, `elsewhere`)")
METHOD_RULE = ("six labelled lines with the values of `env[\"harness\"]`: `Timer: NAME`, `Warm-up: N ms`, "
               "`Synchronization: HOW` (in any words: synchronized, waits for the kernel, CUDA events, or the "
               "record's own), `Statistic: median of N samples`, `Spread: q80 - q20` (or `20th to 80th percentile`) "
               "and `Raw samples: FILE`; another warm-up or sample count in such a line contradicts the record")
CPU_RULE = (f"the `Environment:` line says `{NOT_GPU}`, and no speed-up is claimed anywhere, in "
            "prose, a labelled line or a table row (its header too): a multiplier (`1.5x`, `0.92x`) or a speed word "
            "(`faster`, `speed-up`) unless its sentence negates it or makes it conditional (`no speed-up is claimed` "
            "is fine); no case line, table row or `Outcomes:` count marks a case a win or a loss (a table cell in any "
            "words of one: `win (interpreter)`, `faster`, `slower`)")
RENDER_RULE = ("The note is read as it renders (Markdown, as GitHub and JupyterLab show it): an HTML comment (`<!-- "
               "... -->`, on one line or many) is not read at all, HTML tags are read as spaces, and headings, "
               "paragraphs, list items and table rows are read where Markdown renders them")
PLAIN_RULE = ("A labelled line or table row a reader might not see as the note's own plain text (inside raw HTML "
              "other than a `<details>` fold, struck through, in a block quote, a code block or a heading) is held "
              "to the data but earns nothing")
ID_RULE = ("Case ids are compared after removing zero-width and other format characters, NFKC normalisation and "
           "reading Cyrillic and Greek lookalike letters as Latin; a case id written with such characters is reported")
#: What the feedback says of prose, on every judged note.
PROSE_NOTE = ("prose (every paragraph, list item or sentence that is not a labelled line or a table row) is read by "
              "your instructor or the reviewer, not scored")
STATED = (PRINCIPLE, PROSE_RULE, LABEL_RULE, RENDER_RULE, PLAIN_RULE, ID_RULE,
          SUBSTANCE_RULE, OUTLINE_RULE, SECTION_RULE, ENVIRONMENT_RULE, LIMIT_RULE, DTYPE_RULE, FALLBACK_RULE,
          OUTCOMES_RULE, CASE_RULE, FIGURE_RULE, FIGURES_ARE, TABLE_RULE, NO_LOSS_RULE, METHOD_RULE, CPU_RULE,
          PROSE_NOTE)
