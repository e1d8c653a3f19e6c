"""Exercise 07 reads an outcome where its sentence asserts it (attack round 10, D5): an outcome word under a negation,
a modal or an expectation, in a condition, in an infinitive another verb hopes or fails to make true, or in a question
claims nothing; where the sentence goes on to assert a loss or a tie, that is what it claims. An honest note that says
what was expected of a losing case keeps full marks; a note that asserts the same win loses consistent_with_data.
The readings are in-process string checks (milliseconds); the four graded notes take about 0.2 s each."""

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.rules.ex07_claims import claims_speedup, count_claims, outcome_of

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

#: sentence -> the outcome it asserts of c05 (None: it asserts none)
READINGS = {
    # D5's sentences: none asserts a win
    "c05 failed to be faster": None,
    "c05 was expected to be faster": None,
    "c05 is anything but faster": None,
    "c05 is hardly faster": None,
    "c05 is faster? No.": None,
    "Is c05 faster (9.8 vs 9.0 us)?": None,
    # the same class in other words
    "c05 was supposed to win": None,
    "c05 would have been faster with a wider block": None,
    "c05 should be faster on a real GPU": None,
    "If c05 were faster, the table would say so": None,
    "Had it been tuned, c05 would be faster": None,
    "Had c05 been faster, the table would show it": None,
    "c01 and c02, both bf16, were faster": "win",
    "We hoped for a speed-up on c05": None,
    "c05 isn't faster": None,
    # what such sentences go on to assert
    "c05 was expected to be faster but is slower (9.8 vs 9.0 us)": "loss",
    "c05, expected to win, loses by 9 %": "loss",
    "We hoped c05 would be faster, but it is 9 % slower": "loss",
    "c05 is slower rather than faster": "loss",
    "c05 was expected to be faster; it is within the noise": "neutral",
    # assertions keep their outcome
    "c05 is faster (9.0 -> 8.1 us)": "win",
    "c05 turned out to be slower": "loss",
    "c05 proved to be faster": "win",
    "c05 is the only case to win": "win",
    "As expected, c05 is slower": "loss",
    "Without the cast, c05 is faster": "win",
    "c05 looks faster, but its noise band is wider than that": "neutral",
}


@pytest.mark.parametrize("sentence, outcome", READINGS.items())
def test_an_outcome_is_read_only_where_the_sentence_asserts_it(sentence, outcome):
    assert outcome_of(sentence) == outcome


@pytest.mark.parametrize("text, counts", [
    ("No wins at all; zero losses.", [("win", 0), ("loss", 0)]),
    ("There are no regressions.", [("loss", 0)]),
    ("It is slower on c05; no regression elsewhere.", []),  # a restricted denial counts nothing
    ("c09 is no slower than before; c12 is no faster.", []),  # a comparison, not a count
    ("We expected it to win 3 cases.", []),
    ("Would 2 cases be slower?", []),
    ("It fails to win on 3.", []),
    ("It wins on 3 cases and loses on 2.", [("win", 3), ("loss", 2)]),
])
def test_a_count_is_read_only_where_the_sentence_asserts_it(text, counts):
    assert count_claims(text) == counts


@pytest.mark.parametrize("sentence, claim", [
    ("The kernel was expected to be faster.", False), ("Is it faster?", False),
    ("A GPU run may show a speed-up.", False), ("The kernel is 1.4x faster.", True),
])
def test_a_speed_up_is_claimed_only_where_the_sentence_asserts_it(sentence, claim):
    assert claims_speedup(sentence) is claim


LOSS_CASE = "c05_1024x128_fp16"  # a loss in the fixed table, named as one with its figures by the solution's note


def _grade(summary, *, cpu=""):
    """The solution's note with ``summary`` first in its summary on the fixed table (``cpu`` on the CPU table)."""
    def write(df, env):
        note = solved("ex07")["write_pr_note"](df, env)
        gpu = env.get("device") == "cuda"
        add = summary if gpu and "c01_4096x4096_bf16" in set(df["case_id"]) else cpu if not gpu else ""
        return note.replace("## Summary\n", f"## Summary\n{add}\n", 1) if add else note
    return {r.part: r for r in ex.check_pr_note(write, show=False)}


def test_an_honest_note_that_says_what_a_loss_was_expected_to_be_keeps_full_marks():
    r = _grade(f"{LOSS_CASE} was expected to be faster. Is {LOSS_CASE} faster? No. The fast path was expected never "
               "to be slower.",
               cpu="The kernel was expected to be faster; is it? Only a GPU run can say.")
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


@pytest.mark.parametrize("summary, told", [
    (f"{LOSS_CASE} turned out to be faster.", f"{LOSS_CASE}: the note calls it win"),
    ("There are no wins at all.", "counts 0 win cases, the data has 3"),
    ("The fast path is never slower.", "say where it is slower"),
])
def test_the_same_outcome_asserted_loses_consistency(summary, told):
    r = _grade(summary)
    assert not r["consistent_with_data"].passed and told in r["consistent_with_data"].feedback, r
    assert all(x.passed for k, x in r.items() if k != "consistent_with_data")
