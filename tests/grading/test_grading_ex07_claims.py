"""Exercise 07: a summary that denies the table's own losses loses consistent_with_data; an honest note that states
its synchronization in other words, or wraps its Scope: statement over several lines, keeps its marks."""

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
