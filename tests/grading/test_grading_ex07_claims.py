"""Exercise 07 holds what a note asserts against its data (issue 41, B3 and the PR-note mistake): a summary that
denies the table's own losses, a wrong figure for a case, a neutral case called a win, a wrong count, losses left
unnamed each lose consistent_with_data; an old or contradicted column limit, a dtype left out, a version without its
name lose environment_and_scope; a keyword method loses measurement_method; one sentence said in two sections loses
sections; an outcome called from CPU data loses no_claims_from_cpu_data; each is told what to fix, and only its part
fails. An honest note that states its synchronization in other words, wraps its Scope: statement over several lines,
or says two outcomes in one clause keeps its marks. In-process: each test runs the check (about 0.2 s)."""

import pytest

from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402


def _by_part(results):
    return {r.part: r for r in results}


def _note():
    return solved("ex07")["write_pr_note"]


def _edited(edit):
    def write(df, env):
        return edit(_note()(df, env), df, env)
    return write


def _losses(df):
    return [c for c, k in ex.expected_classes(df).items() if k == "loss"]


def _summary_adds(sentence):
    def edit(note, df, env):
        if env.get("device") != "cuda":  # no speed claim on CPU data (another part)
            return note
        assert _losses(df), "every GPU-shaped table has a loss"
        return note.replace("## Summary\n", f"## Summary\n{sentence(df)}\n", 1)
    return _edited(edit)


@pytest.mark.parametrize("sentence", [
    "The fast path is never slower than F.rms_norm, without regressions.",
    "No regressions: every eligible case is at least as fast as the baseline.",
    "It is always faster on the Triton route.",
])
def test_a_summary_that_denies_its_own_losses_loses_consistency_and_is_told_the_losses(sentence):
    r = _by_part(ex.check_pr_note(_summary_adds(lambda df: sentence), show=False))
    fb = r["consistent_with_data"].feedback
    assert not r["consistent_with_data"].passed and "but the data has" in fb and "say where it is slower" in fb, fb
    assert all(x.passed for k, x in r.items() if k != "consistent_with_data"), r


def test_a_summary_that_names_its_losses_keeps_its_marks():
    def sentence(df):
        losses = _losses(df)
        return f"It is slower on {', '.join(losses)}; no regression elsewhere."
    r = _by_part(ex.check_pr_note(_summary_adds(sentence), show=False))
    assert all(x.passed for x in r.values()), r


def test_synchronization_stated_without_the_label_is_found():
    """The harness's statement in other words: CUDA events read once the kernel has finished (GPU), CPU calls that
    return when done (the CPU record's own words, no label)."""
    def edit(note, df, env):
        h = env["harness"]
        said = ("Each timing is read from CUDA events once the kernel has finished." if env.get("device") == "cuda"
                else h["sync"].split(":", 1)[1].strip().capitalize() + ".")
        return note.replace(f"Synchronization: {h['sync']}.", said)
    r = _by_part(ex.check_pr_note(_edited(edit), show=False))
    assert r["measurement_method"].passed, r["measurement_method"].feedback


def _scope_as_a_wrapped_line(fallback: bool):
    def edit(note, df, env):
        head, rest = note.split("## Scope\n", 1)
        old, rest = rest.split("\n", 1)
        assert "fallback" in old
        tail = "every other call runs the fallback, F.rms_norm." if fallback else "every other call is refused."
        scope = ("Scope: the fast path covers fp16, bf16 and fp32 inputs\n"
                 f"of at most {ex_max_cols()} columns whose rows are contiguous;\n{tail}")
        return head + scope + "\n" + rest
    return _edited(edit)


def ex_max_cols():
    from fastpath_lib.rmsnorm.predicate import MAX_COLS

    return MAX_COLS


def test_a_scope_statement_wrapped_over_lines_is_read_whole():
    r = _by_part(ex.check_pr_note(_scope_as_a_wrapped_line(True), show=False))
    assert r["environment_and_scope"].passed, r["environment_and_scope"].feedback
    r = _by_part(ex.check_pr_note(_scope_as_a_wrapped_line(False), show=False))
    fb = r["environment_and_scope"].feedback
    assert not r["environment_and_scope"].passed and "what happens outside it" in fb, fb


FIXED = "GPU-shaped data"


def _on_fixed_table(edit):
    """The solution's note, edited on the fixed synthetic table only (its figures are known: the edits are exact)."""
    def write(note, df, env):
        return edit(note) if env.get("device") == "cuda" and "c01_4096x4096_bf16" in set(df["case_id"]) else note
    return _edited(write)


def _only_fails(edit, part, *told):
    r = _by_part(ex.check_pr_note(_on_fixed_table(edit), show=False))
    assert not r[part].passed and all(t in r[part].feedback for t in told), r[part].feedback
    assert all(x.passed for k, x in r.items() if k != part), {k: x.feedback for k, x in r.items() if not x.passed}


def _replace(old, new):
    def edit(note):
        assert old in note, old
        return note.replace(old, new, 1)
    return edit


@pytest.mark.parametrize("old, new, told", [
    # a wrong figure in a sentence (c05's candidate median, 9.8 us)
    ("c05_1024x128_fp16 (9 -> 9.8 us", "c05_1024x128_fp16 (9 -> 11.8 us",
     "c05_1024x128_fp16: the note gives it '11.8 us'"),
    # a wrong figure in a case's table row (c12's candidate median, 47.0 us)
    ("| 40.0 | 47.0 | loss |", "| 40.0 | 41.0 | loss |", "c12_2048x2048_fp32_step: its table row gives '41.0'"),
    # a neutral case (inside its noise band) called a win
    ("## Summary\n", "## Summary\nc07_4096x4096_bf16_noisy is faster: 200 -> 160 us.\n",
     "c07_4096x4096_bf16_noisy: the note calls it win"),
    # the same, in a clause that names two outcomes (read in parts)
    ("## Summary\n", "## Summary\nIt is faster on c07_4096x4096_bf16_noisy (200 -> 160 us) but slower on "
     "c05_1024x128_fp16 (9 -> 9.8 us).\n", "c07_4096x4096_bf16_noisy: the note calls it win"),
    # every lower median counted as a win
    ("3 wins", "6 wins", "counts 6 win cases, the data has 3"),
], ids=["sentence figure", "table figure", "outcome claim", "outcome claim in a part", "count"])
def test_a_claim_the_data_contradicts_loses_consistency_and_is_told_which(old, new, told):
    _only_fails(_replace(old, new), "consistent_with_data", f"{FIXED}, " if "count" not in told else FIXED, told)


def test_losses_left_unnamed_lose_consistency():
    def edit(note):
        return "\n".join(ln for ln in note.splitlines() if not ln.startswith("- loss:"))
    _only_fails(edit, "consistent_with_data", "c05_1024x128_fp16: loss in the data, and not named so",
                "c12_2048x2048_fp32_step: loss in the data")


@pytest.mark.parametrize("old, new, told", [
    ("at most 16384 columns", "at most 8192 columns", "a column limit of 8192; the fast path's is 16384"),
    ("at most 16384 columns", "at most 4096 columns",
     "c03_1024x8192_fp32 (8192 columns) takes the Triton route in this table"),
    ("fp16, bf16 and fp32 inputs", "fp16 and bf16 inputs",
     "does not name float32 (each dtype the fast path covers"),
    (", torch 2", ", 2", "each version after its name"),
], ids=["old limit", "limit the data contradicts", "dtype left out", "version without its name"])
def test_a_boundary_or_environment_the_data_contradict_loses_that_part(old, new, told):
    from fastpath_lib.rmsnorm.predicate import MAX_COLS

    assert MAX_COLS == 16384, "the edits above are written for this limit"
    _only_fails(_replace(old, new), "environment_and_scope", told)


def test_a_method_of_keyword_lines_loses_the_method():
    def edit(note):
        head, _ = note.split("## Method\n", 1)
        tail = note.split("## Limitations", 1)[1]
        return (head + "## Method\ntriton.testing.do_bench raw_samples.csv.\nwarm 50 ms. median 100. spread 20 80. "
                "synchron.\n\n## Limitations" + tail)
    _only_fails(edit, "measurement_method", "the timer (triton.testing.do_bench) in a sentence about timing",
                "the warm-up (50 ms) as a warm-up", "the median of 100 samples", "q80 - q20")


def test_one_sentence_said_in_two_sections_counts_for_neither():
    _only_fails(_replace("One read and one write of each row; one launch per call.",
                         "Synthetic teaching data stands in for a GPU run here."),
                "sections", "the mechanism section says nothing of its own", "the limitations section says nothing")


def test_an_outcome_called_from_cpu_data_loses_no_claims():
    def edit(note, df, env):
        if env.get("device") == "cuda":
            return note
        return note.replace("## Summary\n", "## Summary\nc01_4096x4096_bf16 wins under the interpreter: 210 -> 105 "
                            "us.\n", 1)
    r = _by_part(ex.check_pr_note(_edited(edit), show=False))
    fb = r["no_claims_from_cpu_data"].feedback
    assert not r["no_claims_from_cpu_data"].passed and "calls c01_4096x4096_bf16 a win from non-GPU data" in fb, fb
    assert all(x.passed for k, x in r.items() if k != "no_claims_from_cpu_data")


def test_a_clause_of_two_outcomes_read_in_parts_keeps_an_honest_notes_marks():
    r = _by_part(ex.check_pr_note(_on_fixed_table(_replace("## Summary\n", (
        "## Summary\nIt is faster on c01_4096x4096_bf16 (210 -> 140 us) but slower on c05_1024x128_fp16 (9 -> 9.8 "
        "us), while c03_1024x8192_fp32 is neutral.\n"))), show=False))
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


def test_a_subheading_inside_a_section_keeps_its_text_in_that_section():
    """Learner 17, F4: ``### Per-case table`` under ``## Performance`` is part of the performance section (Markdown's
    outline): the table under it is the section's, on every table."""
    def edit(note, df, env):
        assert "\n<details>" in note
        return note.replace("\n<details>", "\n### Per-case table\n\n<details>", 1)
    r = _by_part(ex.check_pr_note(_edited(edit), show=False))
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


def test_a_same_level_heading_ends_the_section():
    """A ``## `` heading before the table ends the performance section: the table is no longer under it."""
    _only_fails(_replace("\n<details>", "\n## Per-case table\n\n<details>"), "sections",
                "the performance section does not list this table's cases")


@pytest.mark.parametrize("cell, honest", [("unmeasured", True), ("not classified", True), ("win", False),
                                          ("win (interpreter, not a GPU measurement)", False), ("slower", False)])
def test_a_cpu_table_class_cell_marks_a_win_or_loss_in_any_words(cell, honest):
    """Learner 17: on CPU data a class cell "win (interpreter, not a GPU measurement)" marks a win as "win" does."""
    def edit(note, df, env):
        if env.get("device") == "cuda":
            return note
        rows = [ln for ln in note.splitlines() if ln.startswith("| c0")]
        assert rows, note
        cells = rows[0].split("|")
        return note.replace(rows[0], "|".join(cells[:-2] + [f" {cell} ", ""]), 1)
    r = _by_part(ex.check_pr_note(_edited(edit), show=False))
    assert r["no_claims_from_cpu_data"].passed == honest, r["no_claims_from_cpu_data"].feedback
