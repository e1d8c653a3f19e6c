"""Exercise 07 reads a note sentence by sentence, whole over the lines it wraps onto, in every part; it cuts a sentence
at the same points before every outcome phrase, and reads a word or a table cell by what it states (reader 18,
F1-1 to F1-7): "slower than the fallback" is a loss, "c01 wins, while c03 is within the noise" a win and a neutral
case, "c03 is not slower" no denial of the table's losses while "Nothing is slower" is one, a scope's fallback
sentence may say so in any words, a class cell `win (1.34x)` marks a win, a device name or "not a GPU measurement"
wrapped over two lines is given. The readings are in-process string checks
(milliseconds); each graded note takes about 0.2 s."""

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex07_note import _denies_losses, _scope_problems
from fastpath_lib.grading.rules.ex07_claims import mentions

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

IDS = [str(c) for c in ex.synthetic_results()["case_id"]]
C01, C03, C05, C10, C12 = "c01_4096x4096_bf16", "c03_1024x8192_fp32", "c05_1024x128_fp16", \
    "c10_4096x4096_fp16_transposed", "c12_2048x2048_fp32_step"


@pytest.mark.parametrize("sentence, read", [
    # the fallback a case is compared with, or that runs it, is a route, not an outcome (F1-1)
    (f"{C05} is 8.9 % slower than the fallback (9.0 vs 9.8 us).", {C05: "loss"}),
    (f"{C12} loses to the fallback: 40 vs 47 us.", {C12: "loss"}),
    (f"{C05} is slower than F.rms_norm, the fallback.", {C05: "loss"}),
    (f"{C01} is faster than its fallback.", {C01: "win"}),
    (f"{C05} is slower vs fallback.", {C05: "loss"}),
    # the class itself
    (f"{C10} falls back.", {C10: "fallback"}),
    (f"Fallback: {C10}.", {C10: "fallback"}),
    (f"{C10} and {C12} are the fallback cases.", {C10: "fallback", C12: "fallback"}),
    # a noise phrase starts a part as every outcome word does (F1-2)
    (f"{C01} wins (1.5x), while {C03} is within the noise (180 vs 178 us).", {C01: "win", C03: "neutral"}),
    (f"{C01} is faster, {C03} on par.", {C01: "win", C03: "neutral"}),
    (f"{C05} is slower and {C03} is unchanged.", {C05: "loss", C03: "neutral"}),
    (f"{C01} wins, whereas {C03} ties.", {C01: "win", C03: "neutral"}),
    # a part that names no case qualifies the one before
    (f"{C03} is 1 % faster, within the noise.", {C03: "neutral"}),
    (f"{C03} is faster, but within its noise.", {C03: "neutral"}),
    (f"Within the noise, {C03} is faster.", {C03: "neutral"}),
    (f"Neutral, inside the noise band: {C03} at 178 us.", {C03: "neutral"}),
])
def test_an_outcome_is_read_from_what_the_words_state(sentence, read):
    assert {m.case: m.outcome for m in mentions(sentence, IDS)} == read


@pytest.mark.parametrize("note, denied", [
    # a sentence that names a case speaks of that case (F1-3)
    (f"{C03} is not slower than the fallback (180 vs 178 us, within the noise).", []),
    ("The kernel adds no launch overhead, so it is not slower to dispatch.", []),
    (f"{C01} is never slower than F.rms_norm.", []),
    ("c09 is no slower than before.", []),
    # "nothing is slower", in any of its words
    ("Nothing is slower.", ["Nothing is slower."]),
    ("No case is slower than F.rms_norm.", ["No case is slower than F.rms_norm."]),
    ("The fast path is never slower.", ["The fast path is never slower."]),
    ("There are no regressions.", ["There are no regressions."]),
    ("It is always faster on the Triton route.", ["It is always faster on the Triton route."]),
    ("It runs without slowdowns.", ["It runs without slowdowns."]),
    # read whole over the lines it wraps onto (F1-4)
    (f"It never regresses large\nrows; {C05} and {C12} are slower.", []),
    ("The fast path is never\nslower than F.rms_norm.", ["The fast path is never slower than F.rms_norm."]),
    # a qualified denial, a hoped-for one, a table row; a heading is checked as a sentence is (round 12b)
    ("No regression elsewhere.", []),
    ("The fast path was expected never to be slower.", []),
    ("## No regressions\n\n| case | class |\n|---|---|\n| c09 | never slower |", ["No regressions"]),
])
def test_a_denial_of_the_tables_losses_is_a_sentence_that_says_nothing_is_slower(note, denied):
    assert _denies_losses(note, IDS) == denied


@pytest.mark.parametrize("sentence, told", [
    ("Calls that are not eligible run F.rms_norm.", False),  # F1-5
    ("Non-contiguous or misaligned inputs fall back.", False),
    ("Everything else runs the unchanged fallback.", False),
    ("Every other call is refused.", True),
])
def test_the_scopes_fallback_sentence_is_read_in_any_words(sentence, told):
    scope = f"The fast path covers fp16, bf16 and fp32 inputs of at most 16384 columns. {sentence}"
    problems = _scope_problems(scope, ex.synthetic_results())
    assert any("what happens outside it" in p for p in problems) is told, problems


def _grade(edit):
    """The solution's note, ``edit`` applied to it on the fixed GPU-shaped table (``edit(note, gpu=False)`` on the CPU
    one)."""
    def write(df, env):
        note = solved("ex07")["write_pr_note"](df, env)
        if env.get("device") != "cuda":
            return edit(note, gpu=False)
        return edit(note, gpu=True) if C01 in set(df["case_id"]) else note
    return {r.part: r for r in ex.check_pr_note(write, show=False)}


def _replacing(old, new, *, gpu=True):
    def edit(note, *, gpu_note):
        if gpu_note != gpu:
            return note
        assert old in note, old
        return note.replace(old, new, 1)
    return lambda note, gpu: edit(note, gpu_note=gpu)


LOSS_LIST = f"- loss: {C05} (9 -> 9.8 us, +8.9 %), {C12} (40 -> 47 us, +17.5 %)"
HONEST = {
    "losses named against the fallback": _replacing(LOSS_LIST, (
        f"- {C05} is 8.9 % slower than the fallback (9.0 vs 9.8 us).\n- {C12} loses to the fallback: 40 vs 47 us.")),
    "a win and a neutral case in one sentence": _replacing("## Summary\n", (
        f"## Summary\n{C01} wins (1.5x), while {C03} is within the noise (180 vs 178 us).\n")),
    "a class cell in more words": _replacing("| 40.0 | 47.0 | loss |", "| 40.0 | 47.0 | **loss** (17.5 % slower) |"),
    "a summary table before the performance table": _replacing("## Summary\n", (
        f"## Summary\n\n| case | candidate |\n|---|---|\n| {C12} | 47 us |\n\n")),
    "the device's name wrapped": _replacing("Data: synthetic GPU (teaching data),",
                                            "Data: synthetic\nGPU (teaching data),"),
    "'not a GPU measurement' wrapped": lambda note, gpu: note if gpu else _wrapped_cpu_note(note),
}


def _wrapped_cpu_note(note):
    """The CPU note with its one "not a GPU measurement" wrapped over two lines (the environment's note, which the
    solution's summary repeats, left out)."""
    said = "These timings are not a GPU measurement; no speed-up is claimed from them."
    assert note.count("not a GPU measurement") == 2 and said in note, note
    note = note.replace(said, "These timings are not a GPU\nmeasurement, and no\nspeed-up is claimed from them.")
    return note.replace(" not a GPU measurement", "")


@pytest.mark.parametrize("edit", HONEST.values(), ids=HONEST.keys())
def test_an_honest_note_written_so_keeps_full_marks(edit):
    r = _grade(edit)
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


MISTAKES = {
    "a loss's class cell says win in more words": (
        _replacing("| 40.0 | 47.0 | loss |", "| 40.0 | 47.0 | win (1.18x) |"), "consistent_with_data",
        f"{C12}: the table says ['win'], the data says loss"),
    "a speed-up wrapped over two lines": (
        _replacing("## Summary\n", "## Summary\nUnder the interpreter the kernel is\n2x faster.\n", gpu=False),
        "no_claims_from_cpu_data", "claims a speed-up from non-GPU data: 'Under the interpreter the kernel is 2x "
        "faster.'"),
    "nothing is slower, wrapped": (
        _replacing("## Summary\n", "## Summary\nThe fast path is never\nslower than F.rms_norm.\n"),
        "consistent_with_data", "'The fast path is never slower than F.rms_norm.', but the data has 2 losses"),
}


@pytest.mark.parametrize("edit, part, told", MISTAKES.values(), ids=MISTAKES.keys())
def test_the_same_mistake_read_whole_fails_its_part_only(edit, part, told):
    r = _grade(edit)
    assert not r[part].passed and told in r[part].feedback, r[part].feedback
    assert all(x.passed for k, x in r.items() if k != part), {k: x.feedback for k, x in r.items() if not x.passed}
