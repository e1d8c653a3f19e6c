"""Exercise 07: the rules its check holds a PR note to, in the exercise's words (each refusal quotes the rule it
applies, and the exercise states every one: ``tests/course/test_exercise_instructions.py``)."""

from __future__ import annotations

from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["STATED", "NAMED_WITH_FIGURES", "COVERED", "RENDER_RULE"]

#: How few cases a note names with their figures, on each table, and still has substance.
NAMED_WITH_FIGURES = 2
#: The rules a note is held to, in the exercise's words: each refusal quotes the rule it applies, and the exercise
#: states every one (``tests/course/test_exercise_instructions.py``).
SUBSTANCE_RULE = (f"sentences (outside tables) that name at least {NAMED_WITH_FIGURES} of the table's cases, each "
                  "with a figure of its own")
OUTLINE_RULE = ("a section runs from its heading to the next heading of the same or a higher level: a `###` "
                "subheading inside `## Performance` is part of it")
SECTION_RULE = "a sentence of its own (5 words or more, said in no other section)"
VERSION_RULE = "each version after its name (`torch 2.5.1`, `triton==3.1.0`)"
LIMIT_RULE = (f"the column limit as a bound on columns (`at most {rms.MAX_COLS} columns`, `cols <= {rms.MAX_COLS}`, "
              f"`the {rms.MAX_COLS}-column limit`)")
COVERED = [str(d).replace("torch.", "") for d in rms.SUPPORTED_DTYPES]
DTYPE_RULE = (f"each dtype the fast path covers ({', '.join(COVERED[:-1])} and {COVERED[-1]}: the predicate's "
              "`SUPPORTED_DTYPES`), by any of its usual names (`fp16`, `float16`, `half`)")
FALLBACK_RULE = ("a sentence that says where the other calls go, the fallback, in any words (`fallback`, `falls back` "
                 "or `F.rms_norm`: `calls that are not eligible run F.rms_norm`)")
FIGURE_RULE = ("a number with a unit (`us`, `µs`, `ms`, `x`, `×` or `%`, or the unit's name: `microseconds`, "
               "`percent`), or paired with one (`9.0 vs 9.8 us`), after "
               "a case id and before the next case id, a `;` or the end of its sentence is a figure of that case "
               "(after a bound or an approximation, `under 10 %`, `about 9 us`, it is none); after a list of case ids, "
               "figures given `respectively` go to the cases in order (`c05 and c12 are slower (9 -> 9.8 us and 40 -> "
               "47 us, respectively)`)")
FIGURES_ARE = ("its medians, its spreads and the difference of its medians (in µs or ms), their ratio either way, the "
               "change either way (as a fraction or in percent) and each spread as a share of its median, to within "
               "one unit of the last digit written")
OUTCOME_RULE = ("A sentence that names cases claims an outcome for them by its words, in any of their forms (`tied`, "
                "`won`, `losses`): neutral (`neutral`; `within`, `inside`, `in`, `under` or `below` the noise or its "
                "spread, a word between or not: `inside its measured spread`; the noise `swallows`, `covers`, "
                "`hides`, `dominates` or `exceeds` it, or `is wider than` it; `no difference` or `no change`, up to "
                "two words between: `no significant speed difference`; `not significant`, `insignificant`, `on par`, "
                "`unchanged`, `indistinguishable`, `ties`) if it says so, else the one outcome its words name, a "
                "comparison included: win (`faster`, `quicker`, `wins`, `speed-up`, `speeds up`, `beats`, "
                "`outperforms`, `improves`, `gains`, `better`, `ahead`), loss (`slower`, `loses`, `loss`, "
                "`regression`, `slowdown`, `worse`, `worsens`, `underperforms`, `trails`, `lags`, `behind`, "
                "`degrades`) or fallback (`falls back`, `fell back`, "
                "`fallback`), where the noun `fallback` after `the`, `its`, `their`, `than`, `vs` or `against` is "
                "the route, no outcome (`slower than the fallback` is a loss, `the fallback cases` name the outcome); "
                "only an affirmed word claims: a word its clause negates or makes modal, wherever in the clause "
                "(`not slower`, `hardly faster`, `is not, whatever the table suggests, slower`, `would be faster`, "
                "`was expected to be faster`, `failed to win`; an opening phrase without a verb of its own, `as "
                "expected,`, is not part of the clause), a word its sentence denies or supposes anywhere before it "
                "(`it is a myth that`, `untrue`, `false`, `we deny that`, `if`, `whether`, `perhaps`, `possibly`) or "
                "right after it (`slower if the cache is cold`), and a word in a question (`faster?`) claims nothing, "
                "and the feedback "
                "asks you to state it affirmatively; a note that denies the outcome the data gives a case (`it is a "
                "myth that c05 is slower`) contradicts the data, and a part that asserts two outcomes for a case "
                "claims both; a sentence whose words name two outcomes is read in parts, cut before each outcome word, "
                "a noise phrase too, that follows a comma, a `;`, `and`, `but`, `while` or `whereas` (case ids, "
                "parentheses and words such as `is` may stand between): `c01 wins, while c05 and c12 lose`, `c01 "
                "wins, while c03 is within the noise`; a part that names no case belongs to the part before (`c03 is "
                "1 % faster, within the noise` is neutral), or where it opens the sentence to the part after (`within "
                "the noise, c03 is faster`), and where it cannot be cut it claims nothing")
COUNT_RULE = ("A number bound to an outcome word (any word above, `cases` or `of the cases` between them or not) is a "
              "count, the number first (`4 wins`, `3 faster cases`, `3 cases are faster`, `3 are faster`) or the "
              "outcome first (`wins on 4 cases`, `wins 3 cases`, `faster in 3 cases`, `within the noise on 4`), "
              "`no wins` counts none where nothing restricts it (`no regression elsewhere` counts nothing), each "
              "only where its sentence asserts it; a number bound to another noun (`two fallback runs`, `faster on 2 "
              "rows`, `loses 1 µs`) counts no cases")
SUMMARY_RULE = ("the **Summary** says, for each of win, neutral and loss that the table has, how many (a count) or "
                "which cases (an outcome claim)")
TABLE_RULE = ("a performance table with one row per case id (first cell), its route and its class (win/neutral/loss/"
              "fallback, as in exercise 06), each cell read as a sentence is (`win (1.34x)` marks a win; no other cell "
              "of the row may claim another outcome); a case's row is its row under the **Performance** heading, "
              "else its first row anywhere; every other table row that names a case, anywhere in the note, is a claim "
              "too: its route, the outcome its cells claim or deny and every figure in it (`1.50x faster`, `9.8 us`) "
              "are held to the data")
NO_LOSS_RULE = ("the note says nowhere that nothing is slower (a loss word after a word that denies every one, in one "
                "clause: `never slower`, `nothing is slower`, `no regressions`, `without losses`, `no shape got "
                "worse`; or a win word said of every case: `always faster`, `beats it on every shape`, `improves on "
                "it everywhere`, `all cases win`) "
                "while the table has losses, unless the same sentence names a case or its exceptions (`except`, "
                "`but`, `other than`, `elsewhere`)")
NAMED_RULE = ("each loss and each neutral case is named outside the table, in a sentence that claims its outcome, "
              "with a figure of its own")
METHOD_RULE = ("each in a sentence that states it: the timer in a sentence about timing, the warm-up as `a warm-up of "
               "N ms`, the synchronization with what it guards (`synchronized before each timing is read`), the "
               "statistic with its sample count (`the median of N samples`), the spread as a range of quantiles "
               "(`q80 - q20`, `20th to 80th percentile`) and the raw samples' file with what it holds (`Raw samples: "
               "FILE`)")
RENDER_RULE = ("The note is read as it renders (Markdown, as GitHub and JupyterLab show it): an HTML comment (`<!-- "
               "... -->`, on one line or many) is not read at all, HTML tags are read as spaces, and headings, "
               "paragraphs, list items and table rows are read where Markdown renders them")
#: What is checked but earns nothing (round 12b), and case ids read as a reader reads them.
PLAIN_RULE = ("Text a reader might not see as the note's own plain statement can lose points but never earn them")
ID_RULE = ("Case ids are compared after removing zero-width and other format characters, NFKC normalisation and "
           "reading Cyrillic and Greek lookalike letters as Latin; a case id written with such characters is reported")
STATED = (RENDER_RULE, PLAIN_RULE, ID_RULE,
          SUBSTANCE_RULE, OUTLINE_RULE, SECTION_RULE, VERSION_RULE, LIMIT_RULE, DTYPE_RULE, FALLBACK_RULE,
          FIGURE_RULE, FIGURES_ARE, OUTCOME_RULE, COUNT_RULE, SUMMARY_RULE, TABLE_RULE, NO_LOSS_RULE, NAMED_RULE,
          METHOD_RULE)
