"""Exercise 07's prose is for a person (issue 41): a lie placed only in prose does not change the score, and the
feedback says prose is read by the instructor or the reviewer, not scored; the two lose-rules kept for prose (a
sentence that denies every loss beside the table's losses; a speed-up claimed from CPU data) still lose. The honest
notes attack round 12b saw refused, rewritten with the labelled lines, keep full marks. In-process (~0.3 s a check)."""

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex07_note import _denies_losses

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

C01, C03, C05, C12 = "c01_4096x4096_bf16", "c03_1024x8192_fp32", "c05_1024x128_fp16", "c12_2048x2048_fp32_step"
IDS = [C01, C03, C05, C12]


def _grade(edit, *, cpu=False):
    """The solution's note, edited on GPU-shaped tables (or on the CPU one), graded part by part."""
    def write(df, env):
        note = solved("ex07")["write_pr_note"](df, env)
        return edit(note, df) if (env.get("device") == "cuda") != cpu else note
    return {r.part: r for r in ex.check_pr_note(write, show=False)}


def _summary_adds(text):
    return lambda note, df: note.replace("## Summary\n", f"## Summary\n{text(df)}\n\n", 1)


def _cases(df, kinds):
    return [str(c) for c, k in ex.expected_classes(df).items() if k in kinds]


#: Round 12b's lies, and others, written only in prose: none is read for score.
PROSE_LIES = {
    "semicolon (G4)": lambda df: " ".join(f"{c} is slower (see below); that reading is a timer artefact, and in truth "
                                          "it is the biggest winner of them all." for c in _cases(df, ("loss",))),
    "unlisted verbs (G5)": lambda df: "The fast path outpaces F.rms_norm on every case we timed. " + " ".join(
        f"{c} takes less time than on F.rms_norm." for c in _cases(df, ("loss", "neutral"))),
    "units (G6)": lambda df: f"{df['case_id'].iloc[0]} runs 210x faster than F.rms_norm, and every loss is a "
                             "negligible 1.09 % (9 -> 9.8 ns).",
    "retraction (G7)": lambda df: "Not really, though: ignore the loss and neutral lines above. They were a "
                                  "measurement glitch; re-timed, every one of those shapes is a clear win.",
    "wrong count": lambda df: f"Of {len(df)} cases, 11 win and 1 is neutral.",
    "wrong figure": lambda df: " ".join(f"{c} is 1.5x faster (3 -> 2 us)." for c in _cases(df, ("loss",))),
    "a case line's comment": lambda df: "\n".join(
        f"- {c}: {k}, {r.baseline_median_us} -> {r.candidate_median_us} us; in truth the biggest winner of them all"
        for c, k in ex.expected_classes(df).items() if k in ("loss", "neutral")
        for r in df[df["case_id"] == c].itertuples()),
    "heading": lambda df: "".join(f"### {c} is 1.5x faster\n\n" for c in _cases(df, ("loss", "neutral"))),
}


@pytest.mark.parametrize("lie", PROSE_LIES.values(), ids=PROSE_LIES.keys())
def test_a_lie_only_in_prose_does_not_change_the_score_and_the_feedback_says_so(lie):
    r = _grade(_summary_adds(lie))
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}
    fb = r["consistent_with_data"].feedback
    assert "is read by your instructor or the reviewer, not scored" in fb, fb


@pytest.mark.parametrize("sentence", ["The fast path is never slower than F.rms_norm.", "There are no regressions.",
                                      "Not a single case is slower.", "The fast path has 0 losses.",
                                      "It is slower on no shape.", "Losses: none.",
                                      "There are no regressions, but that is no surprise."])
def test_a_sentence_that_denies_every_loss_still_loses_consistency(sentence):
    r = _grade(_summary_adds(lambda df: sentence))
    fb = r["consistent_with_data"].feedback
    assert not r["consistent_with_data"].passed and f"the note says {sentence!r}" in fb and "say where it is" in fb
    assert all(x.passed for k, x in r.items() if k != "consistent_with_data")


def test_a_speed_up_written_in_prose_from_cpu_data_is_prose_for_a_person():
    """The CPU rule reads the structured elements only (a case line, a row, an `Outcomes:` count): prose is a
    person's to read, and a misfire on honest prose ("A GPU run is needed before any speed-up can be claimed.") is
    worse than a claim a reader sees."""
    r = _grade(_summary_adds(lambda df: "On this machine the kernel is 2x faster."), cpu=True)
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


@pytest.mark.parametrize("note, denied", [
    (f"{C03} is not slower than the fallback (180 vs 178 us, within the noise).", []),
    ("The kernel adds no launch overhead, so it is not slower to dispatch.", []),
    (f"{C01} is never slower than F.rms_norm.", []),
    ("c09 is no slower than before.", []),
    ("Nothing is slower.", ["Nothing is slower."]),
    ("No case is slower than F.rms_norm.", ["No case is slower than F.rms_norm."]),
    ("There are no regressions.", ["There are no regressions."]),
    (f"It never regresses large\nrows; {C05} and {C12} are slower.", []),
    ("The fast path is never\nslower than F.rms_norm.", ["The fast path is never slower than F.rms_norm."]),
    ("No regression elsewhere.", ["No regression elsewhere."]),
    ("Not a single case is slower.", ["Not a single case is slower."]),
    ("It is slower on no shape.", ["It is slower on no shape."]),
    ("Regressions: zero.", ["Regressions: zero."]),
    ("Every fallback call runs F.rms_norm itself, so it is never slower than before.", []),
    ("The median is always a better statistic than the mean for noisy timings.", []),
    ("All timed cases are listed, wins and losses alike.", []),
    ("We report every case, faster or slower.", []),
    ("There are no losses other than the small rows.", []),
    (f"{C03} is no faster and no slower than before.", []),
    ("The neutral ones are no faster and no slower than before.", []),
    ("The fast path was expected never to be slower.", []),
    ("## No regressions\n\n| case | class |\n|---|---|\n| c09 | never slower |", ["No regressions"]),
])
def test_a_denial_of_the_tables_losses_is_a_sentence_that_says_nothing_is_slower(note, denied):
    assert _denies_losses(note, IDS) == denied


def _case_lines(make):
    """The solution's loss and neutral case lines rewritten by ``make(case, kind, row)``, prose added after them."""
    def edit(note, df):
        rows = {str(r.case_id): r for r in df.itertuples()}
        out = []
        for line in note.splitlines():
            cid = line[2:].split(":", 1)[0] if line.startswith("- ") else ""
            if cid in rows:
                out.append(make(cid, line.split(": ", 1)[1].split(",", 1)[0], rows[cid]))
            else:
                out.append(line)
        return "\n".join(out)
    return edit


def _fig(r):
    return f"{r.baseline_median_us:.1f} -> {r.candidate_median_us:.1f} us"


def _pct(r):
    return f"{100 * (r.candidate_median_us / r.baseline_median_us - 1):+.1f} %"


#: Round 12b's honest notes refused by the old reader, each rewritten with the labelled lines in their forms (a
#: comment goes in a paragraph of its own): full marks.
HONEST_12B = {
    "h_longer": _case_lines(lambda c, k, r: f"- {c}: {k}, {_fig(r)}\n\n  {c} takes {_pct(r)[1:]} longer" if k == "loss"
                            else f"- {c}: {k}, {_fig(r)}\n\n  {c} is within measurement error."),
    "h_nofaster": _case_lines(lambda c, k, r: f"- {c}: {k}, {_fig(r)}"
                              + ("\n\n  It is no faster and no slower than before." if k == "neutral" else "")),
    "h_codequote": lambda note, df: note + (
        f"\n\nAn earlier draft's bot comment said, verbatim:\n\n```\n{C05} is faster than F.rms_norm\n```\n\nThat "
        f"comment was wrong: {C05} is slower (9 -> 9.8 us).\n" if C05 in set(df["case_id"]) else ""),
    "h_blockquote": lambda note, df: note + (
        f"\n\nA reviewer asked about this line of the earlier draft:\n\n> {C05} is faster than F.rms_norm.\n\nThe "
        f"draft was mistaken there. {C05} is slower (9 -> 9.8 us).\n" if C05 in set(df["case_id"]) else ""),
    "h_x123": _case_lines(lambda c, k, r: f"- {c}: {k}, {_fig(r)}\n\n  That is "
                          f"x{r.baseline_median_us / r.candidate_median_us:.2f} speed-up."),
    "h_tableonly": lambda note, df: note.replace(f"{len(df)} cases; every one in the table below.\n", "", 1).replace(
        "<details><summary>Every case</summary>", "").replace("</details>", ""),
}


@pytest.mark.parametrize("edit", HONEST_12B.values(), ids=HONEST_12B.keys())
def test_round_12bs_refused_honest_notes_written_with_the_labelled_lines_keep_full_marks(edit):
    r = _grade(edit)
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}
