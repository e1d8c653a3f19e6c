"""Exercise 07 reads a count as a number bound to an outcome word, in either order (learner 17, F1, F2, F5): every
honest summary below states the fixed table's counts (3 wins, 4 neutral, 2 losses, 3 fallback) in its own words and
keeps full marks; the same summary with a wrong count loses consistent_with_data, and the feedback quotes the sentence
the count was read from. A number bound to another noun ("two fallback runs") counts no cases. In-process: each test
runs the check (about 0.2 s)."""

import re

import pytest

from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

FIXED_ID = "c01_4096x4096_bf16"
#: honest summaries of the fixed table's counts, each in a wording a learner used (learner 17's report)
HONEST = [
    "Across the 12 predeclared cases the Triton route wins on 3, is within the noise on 4 and loses on 2, while 3 "
    "fall back by design.",
    "Out of 12 cases: 3 faster cases, 2 slower cases and 4 neutral cases.",
    "The kernel wins 3 cases, loses 2 and is neutral on 4.",
    "3 cases are faster, 4 cases are neutral and 2 cases are slower.",
    "3 are faster, 2 are slower and 4 are neutral.",
    "It is faster in 3 cases, slower in 2 and neutral in 4.",
    "4 of the cases are within the noise; 3 wins and 2 losses.",
]


def _moved(summary):
    """The solution's note on the fixed table, its summary's counts and outcome lists replaced by ``summary`` (the
    lists move to the performance section, where they still name each case's outcome with its figures)."""
    def write(df, env):
        note = solved("ex07")["write_pr_note"](df, env)
        if env.get("device") != "cuda" or FIXED_ID not in set(df["case_id"]):
            return note
        lines = note.splitlines()
        counts = next(i for i, ln in enumerate(lines) if ln.startswith("Of 12 cases:"))
        lists = [ln for ln in lines[counts + 1:counts + 5] if ln.startswith("- ")]
        assert len(lists) == 4, lines[counts:counts + 5]
        rest = lines[:counts] + [summary] + lines[counts + 1 + len(lists):]
        at = rest.index("## Performance") + 2
        return "\n".join(rest[:at] + lists + rest[at:])
    return write


def _grade(summary):
    return {r.part: r for r in ex.check_pr_note(_moved(summary), show=False)}


@pytest.mark.parametrize("summary", HONEST)
def test_an_honest_count_in_any_word_order_keeps_full_marks(summary):
    r = _grade(summary)
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


@pytest.mark.parametrize("summary", HONEST)
def test_the_same_count_wrong_loses_consistency_and_quotes_its_sentence(summary):
    wrong = re.sub(r"\b2\b", "5", summary, count=1)  # the loss count (no other number is a lone 2)
    assert wrong != summary
    r = _grade(wrong)["consistent_with_data"]
    assert not r.passed and "counts 5 loss cases, the data has 2" in r.feedback and wrong in r.feedback, r.feedback


def test_a_number_of_runs_beside_an_outcome_word_counts_no_cases():
    """F2: "two fallback runs" counts runs (baseline and candidate both on the fallback), not cases."""
    r = _grade("Of 12 cases: 3 wins, 4 neutral, 2 losses, 3 fallback. c10_4096x4096_fp16_transposed falls back; its "
               "timings (300 vs 240 us) compare two fallback runs.")
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


def test_a_summary_with_no_count_is_told_what_was_read_from_each_sentence():
    r = _grade("The fast path helps some shapes and hurts others.")["consistent_with_data"]
    assert not r.passed and "the summary does not say where the fast path is win or neutral or loss" in r.feedback
    assert "The fast path helps some shapes and hurts others.': no outcome count or claim" in r.feedback, r.feedback
