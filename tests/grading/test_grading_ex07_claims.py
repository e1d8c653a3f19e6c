"""Exercise 07 scores only structured elements, each held to the data (issue 41, "a grader whose scores mean
something"): a wrong value in a labelled line or a table row (a case line's class or figure, an ``Outcomes:`` count,
a route, a version, the warm-up, the sample count) is an inconsistency quoted with its line, and a missing or malformed
element is named with the form it should take; only its part fails. In-process: each test runs the check (~0.3 s)."""

import pytest

from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

FIXED = "GPU-shaped data"


def _by_part(results):
    return {r.part: r for r in results}


def _note():
    return solved("ex07")["write_pr_note"]


def _edited(edit):
    def write(df, env):
        return edit(_note()(df, env), df, env)
    return write


def _on_fixed_table(edit):
    """The solution's note, edited on the fixed synthetic table only (its figures are known: the edits are exact)."""
    def write(note, df, env):
        return edit(note) if env.get("device") == "cuda" and "c01_4096x4096_bf16" in set(df["case_id"]) else note
    return _edited(write)


def _only_fails(edit, part, *told, also=()):
    r = _by_part(ex.check_pr_note(_on_fixed_table(edit), show=False))
    assert not r[part].passed and all(t in r[part].feedback for t in told), r[part].feedback
    assert all(x.passed for k, x in r.items() if k != part and k not in also), {
        k: x.feedback for k, x in r.items() if not x.passed}
    return r[part].feedback


def _replace(old, new):
    def edit(note):
        assert old in note, old
        return note.replace(old, new, 1)
    return edit


def _drop(prefix):
    def edit(note):
        assert any(ln.startswith(prefix) for ln in note.splitlines()), prefix
        return "\n".join(ln for ln in note.splitlines() if not ln.startswith(prefix))
    return edit


C05 = "- c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)"
PROSE = "is read as prose: the form is a case line for each loss"


@pytest.mark.parametrize("old, new, told", [
    (C05, "- c05_1024x128_fp16: loss, 9.0 -> 11.8 us", "gives figures that are not c05_1024x128_fp16's"),
    (C05, "- c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+9.9 %)", "gives figures that are not c05_1024x128_fp16's"),
    (C05, "- c05_1024x128_fp16: loss, 9.0 -> 9.8 ms (+8.9 %)", "gives figures that are not c05_1024x128_fp16's"),
    (C05, "- c05_1024x128_fp16: win, 9.0 -> 9.8 us", "calls c05_1024x128_fp16 win, the data says loss"),
    ("- c07_4096x4096_bf16_noisy: neutral,", "- c07_4096x4096_bf16_noisy: win,",
     "calls c07_4096x4096_bf16_noisy win, the data says neutral"),
    (C05, "- c05_1024x128_fp16: loss, 9.0 -> 9.8 ns", PROSE),  # ns: not in the form
    (C05, "- c05_1024x128_fp16: slower, 9.0 -> 9.8 us", "calls c05_1024x128_fp16 slower, the data says loss"),
    (C05, "- c05_1024x128_fp16: loss-free, 9.0 -> 9.8 us", "no case line for it is in its form"),
    (C05, "", "c05_1024x128_fp16 is a loss in the data, and no case line for it"),
    (C05, C05 + "; in truth 1.5x faster", PROSE),  # a comment: the line is prose
    ("| 40.0 | 47.0 | loss |", "| 40.0 | 41.0 | loss |", "no performance table row in its form for "
     "c12_2048x2048_fp32_step"),
    ("| 40.0 | 47.0 | loss |", "| 47.0 | 40.0 | loss |", "c12_2048x2048_fp32_step | triton | 47.0 | 40.0 | loss' does "
     "not match"),
    ("| 40.0 | 47.0 | loss |", "| 40.0 | 47.0 | win |", "says 'win', the data says loss"),
    ("| 40.0 | 47.0 | loss |", "| 40.0 | 47.0 | loss | win |", None),  # an extra column is not read
    ("| c09_512x4096_fp16_small | fallback |", "| c09_512x4096_fp16_small | triton |", "gives route 'triton'"),
    ("Outcomes: 3 win", "Outcomes: 6 win", "'Outcomes: 6 win, 4 neutral, 2 loss, 3 fallback' counts 6 win, the data"),
    (", 2 loss, 3 fallback", ", 3 fallback", "no `Outcomes:` line in its form under the Summary heading"),
    ("2 loss, 3 fallback", "two losses, 3 fallback", "is read as prose: the form is `Outcomes: N win"),
    ("3 fallback\n", "3 fallback (out of 12 cases)\n", "is read as prose: the form is `Outcomes: N win"),
    ("Outcomes: 3 win", "Wins: 3 win", "no `Outcomes:` line in its form under the Summary heading"),
], ids=["case figure", "case change", "wrong unit", "case class", "neutral called a win", "unit not in the form",
        "class in other words", "loss-free", "case line left out", "a comment", "table figure", "figures swapped",
        "table class", "extra column", "table route", "count", "count left out", "count in words", "more on the line",
        "no Outcomes line"])
def test_a_wrong_or_missing_element_loses_consistency_and_is_told_which(old, new, told):
    if told is None:
        r = _by_part(ex.check_pr_note(_on_fixed_table(_replace(old, new)), show=False))
        assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}
        return
    fb = _only_fails(_replace(old, new), "consistent_with_data", told)
    assert "not scored" in fb  # the feedback says what it does not read


def test_an_outcomes_line_outside_the_summary_earns_nothing_and_is_still_held():
    move = _replace("Outcomes: 3 win, 4 neutral, 2 loss, 3 fallback\n", "")

    def edit(note):
        wrong = "Outcomes: 3 win, 4 neutral, 2 loss, 1 fallback"
        return move(note).replace("## Limitations\n", f"## Limitations\n{wrong}\n\n")
    fb = _only_fails(edit, "consistent_with_data", "no `Outcomes:` line in its form under the Summary heading")
    assert "counts 1 fallback, the data has 3" in fb


@pytest.mark.parametrize("old, new, told", [
    ("at most 16384 columns", "at most 8192 columns", "gives a column limit of 8192; the fast path's is 16384"),
    ("at most 16384 columns", "at most 16,384 columns", None),
    ("at most 16384 columns", "at most MAX_COLS = 16384 columns", None),
    ("fp16, bf16 and fp32 inputs", "fp16 and bf16 inputs", "names float16, bfloat16; the fast path covers exactly"),
    ("fp16, bf16 and fp32 inputs", "fp16, bf16, fp32 and fp64 inputs", "no `Scope:` line in its form"),
    ("fp16, bf16 and fp32 inputs", "half, torch.bfloat16 and float32 inputs", None),
    ("every other call runs F.rms_norm", "no call ever falls back", "no `Scope:` line in its form"),
    (", torch ", ", ", "no `Environment:` line in its form"),
    (", torch ", ", torch 1.0.0, pytorch ", "no `Environment:` line in its form"),
    ("triton 3.8.0,", "triton 3.9.0,", "gives triton 3.9.0, the record 3.8.0"),
    ("Environment: synthetic GPU", "Environment: Synthetic GPU", None),
    ("Environment: synthetic GPU", "Environment: real GPU", "gives device 'real GPU (teaching data)'"),
], ids=["old limit", "limit with commas", "limit named", "dtype left out", "extra dtype", "dtype aliases",
        "fallback denied", "version without its name", "a wrong version beside the right one", "wrong version",
        "device capitalised", "wrong device"])
def test_a_boundary_or_environment_the_data_contradict_loses_that_part(old, new, told):
    from fastpath_lib.rmsnorm.predicate import MAX_COLS

    assert MAX_COLS == 16384, "the edits above are written for this limit"
    if told is None:
        r = _by_part(ex.check_pr_note(_on_fixed_table(_replace(old, new)), show=False))
        assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}
        return
    # an Environment line not in its form says nothing synthetic either (consistent_with_data)
    _only_fails(_replace(old, new), "environment_and_scope", told, also=("consistent_with_data",)
                if "in its form" in told and "Environment" in told else ())


@pytest.mark.parametrize("edit, told", [
    (_drop("- Timer:"), "no `Timer: triton.testing.do_bench` line"),
    (_drop("- Warm-up:"), "no `Warm-up: 50 ms` line"),
    (_drop("- Synchronization:"), "no `Synchronization: the device is synchronized"),
    (_drop("- Statistic:"), "no `Statistic: median of 100 samples` line"),
    (_drop("- Spread:"), "no `Spread: q80 - q20` line"),
    (_drop("- Raw samples:"), "no `Raw samples: raw_samples.csv` line"),
    (_replace("- Warm-up: 50 ms", "- Warm-up: 50 ms (then 25 ms more)"), "is read as prose: the form is six labelled"),
    (_replace("- Warm-up: 50 ms", "- Warm-up: 25 ms"), "'Warm-up: 25 ms' contradicts the record (`Warm-up: 50 ms`)"),
    (_replace("median of 100 samples", "median of 1000 samples"), "contradicts the record (`Statistic: median of 100"),
    (_replace("median of 100 samples", "mean of 100 samples"), "contradicts the record (`Statistic: median of 100"),
    (_replace("- Spread: q80 - q20", "- Spread: q90 - q10"), "contradicts the record (`Spread: q80 - q20`)"),
    (_replace("- Synchronization: the device", "- Synchronization: never; the device"), "no `Synchronization:"),
    (_replace("- Timer: triton.testing.do_bench", "Timed with triton.testing.do_bench."), "no `Timer:"),
], ids=["timer", "warm-up", "sync", "statistic", "spread", "raw", "more on the line", "other warm-up", "samples",
        "mean", "quantiles", "sync in other words", "timer in prose"])
def test_each_method_line_missing_or_wrong_fails_the_method_only(edit, told):
    _only_fails(edit, "measurement_method", told)


def test_a_method_of_keyword_lines_loses_the_method():
    def edit(note):
        head, _ = note.split("## Method\n", 1)
        tail = note.split("## Limitations", 1)[1]
        return (head + "## Method\ntriton.testing.do_bench raw_samples.csv.\nwarm 50 ms. median 100. spread 20 80. "
                "synchron.\n\n## Limitations" + tail)
    _only_fails(edit, "measurement_method", "no `Timer: triton.testing.do_bench` line", "no `Warm-up: 50 ms` line")


def test_a_method_written_for_the_fixed_environment_fails():
    fixed = ex.synthetic_environment()["harness"]

    def write(df, env):
        return _note()(df, dict(env, harness=fixed) if env.get("device") == "cuda" else env)

    r = _by_part(ex.check_pr_note(write, show=False))
    assert not r["measurement_method"].passed and "drawn" in r["measurement_method"].feedback


def test_one_sentence_said_in_two_sections_counts_for_neither():
    _only_fails(_replace("One read and one write of each row; one launch per call.",
                         "Synthetic teaching data stands in for a GPU run here."),
                "sections", "the mechanism section says nothing of its own", "the limitations section says nothing")


def test_a_same_level_heading_ends_the_section():
    """A ``## `` heading before the table ends the performance section: the table is no longer under it."""
    _only_fails(_replace("\n<details>", "\n## Per-case table\n\n<details>"), "consistent_with_data",
                "no performance table row in its form for c01_4096x4096_bf16")


def test_a_subheading_inside_a_section_keeps_its_text_in_that_section():
    def edit(note, df, env):
        return note.replace("\n<details>", "\n### Per-case table\n\n<details>", 1)
    r = _by_part(ex.check_pr_note(_edited(edit), show=False))
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


def _cpu(edit):
    def write(note, df, env):
        return note if env.get("device") == "cuda" else edit(note)
    return _edited(write)


@pytest.mark.parametrize("edit, told", [
    (lambda n: n.replace("## Summary\n", "## Summary\n- c01_4096x4096_bf16: win, 210 -> 105 us\n", 1),
     "marks c01_4096x4096_bf16 a win or a loss from non-GPU data"),
    (lambda n: n.replace("## Summary\n", "## Summary\n- c01_4096x4096_bf16: faster, 2.0x, no doubt\n", 1),
     "marks c01_4096x4096_bf16 a win or a loss from non-GPU data"),
    (lambda n: n.replace("## Summary\n", "## Summary\nOutcomes: 3 win, 0 neutral, 0 loss, 1 fallback\n\n", 1),
     "counts wins or losses from non-GPU data"),
    (lambda n: n.replace("## Summary\n", "## Summary\n> | case | class |\n> |---|---|\n"
                         "> | c01_4096x4096_bf16 | win |\n\n", 1),
     "marks c01_4096x4096_bf16 a win or a loss from non-GPU data"),
    (lambda n: n.replace(", not a GPU measurement", ", not a GPU measurement; 2x faster", 1),
     "no `Environment:` line in its form says 'not a GPU measurement'"),
], ids=["case line", "case line in other words", "Outcomes", "quoted row", "more on the environment line"])
def test_a_claim_from_cpu_data_loses_no_claims_only(edit, told):
    r = _by_part(ex.check_pr_note(_cpu(edit), show=False))
    fb = r["no_claims_from_cpu_data"].feedback
    assert not r["no_claims_from_cpu_data"].passed and told in fb, fb
    # a row or line held (a class other than `unmeasured`) is inconsistent too; an environment line not in its form
    # gives no environment
    assert all(x.passed for k, x in r.items() if k not in ("no_claims_from_cpu_data", "environment_and_scope",
                                                           "consistent_with_data")), r


@pytest.mark.parametrize("cell, honest", [("unmeasured", True), ("win", False),
                                          ("win (interpreter, not a GPU measurement)", False), ("slower", False)])
def test_a_cpu_table_class_cell_marks_a_win_or_loss_in_any_words(cell, honest):
    """Learner 17: on CPU data a class cell "win (interpreter, not a GPU measurement)" marks a win as "win" does."""
    def edit(note):
        rows = [ln for ln in note.splitlines() if ln.startswith("| c0")]
        cells = rows[0].split("|")
        return note.replace(rows[0], "|".join(cells[:-2] + [f" {cell} ", ""]), 1)
    r = _by_part(ex.check_pr_note(_cpu(edit), show=False))
    assert r["no_claims_from_cpu_data"].passed == honest, r["no_claims_from_cpu_data"].feedback


def test_an_environment_in_other_words_is_no_environment_and_does_not_say_synthetic():
    r = _by_part(ex.check_pr_note(_on_fixed_table(_replace("Environment: ", "Device: ")), show=False))
    assert "no `Environment:` line in its form (`Environment: DEVICE, torch X, triton Y, KIND`" in \
        r["environment_and_scope"].feedback
    assert "no `Environment:` line in its form says `synthetic`" in r["consistent_with_data"].feedback
    assert [k for k, x in r.items() if not x.passed] == ["environment_and_scope", "consistent_with_data"]


def test_a_section_whose_only_content_is_a_short_labelled_line_says_something():
    """A labelled line is content of its section, however short (``Warm-up: 50 ms`` has four words)."""
    def edit(note):
        note = note.replace("- Warm-up: 50 ms\n", "", 1)
        return note.replace("One read and one write of each row; one launch per call.", "- Warm-up: 50 ms", 1)
    r = _by_part(ex.check_pr_note(_on_fixed_table(edit), show=False))
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}
