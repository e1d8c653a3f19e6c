"""Exercise 07, attack round 12b: a labelled line or table row a reader might not see as the note's own plain text
(inside raw HTML, struck through, a heading, a block quote, code) is held to the data but earns nothing, and a case id
written with hidden or lookalike characters is read as the case and reported. Each attack below scored 7/7 before;
in-process (each test runs the check, about 0.3 s)."""

import pytest

from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402


def _grade(edit):
    def write(df, env):
        note = solved("ex07")["write_pr_note"](df, env)
        return edit(note, df) if env.get("device") == "cuda" else note
    return {r.part: r for r in ex.check_pr_note(write, show=False)}


def _losers(df):
    return [str(c) for c, k in ex.expected_classes(df).items() if k in ("loss", "neutral")]


def _lie_hidden_by(tag):
    """Each loss and neutral case line's class hidden (or struck) inline, a visible "win" in its place."""
    def edit(note, df):
        out = []
        for line in note.splitlines():
            for kind in ("loss", "neutral"):
                if line.startswith("- ") and f": {kind}, " in line:
                    head, tail = line.split(f": {kind}, ", 1)
                    line = f"{head}: <{tag}>{kind}</{tag.split()[0]}> win, {tail}"
            out.append(line)
        return "\n".join(out)
    return edit


def _table(mark):
    def edit(note, df):
        rows = "\n".join(f"| {mark(str(c))} | triton | 1.5x faster | win |" for c in df["case_id"])  # route, class held
        table = f"Headline table:\n\n| case | route | speed-up | class |\n|---|---|---|---|\n{rows}\n"
        return note.replace("## Eligibility", table + "\n## Eligibility", 1)
    return edit


@pytest.mark.parametrize("opening", ["<div hidden>", '<div style="display:none">', "> <details open>\n>",
                                     "<details hidden>", '<details style="display:none">', "<details inert>"])
def test_an_honest_note_a_reader_does_not_see_as_the_notes_own_earns_nothing(opening):
    """G1: one visible sentence, the honest note inside a hidden element (or a block quote): its labelled lines and
    its table earn nothing, so the note has no substance and no part is judged."""
    def edit(note, df):
        if opening.startswith(">"):
            return "## Summary\nGreat results all round; please merge.\n\n" + "\n".join("> " + ln for ln in
                                                                                      note.splitlines())
        close = "</details>" if opening.startswith("<details") else "</div>"
        return f"## Summary\nGreat results all round; please merge.\n\n{opening}\n\n{note}\n\n{close}\n"
    r = _grade(edit)
    assert not any(x.passed for x in r.values()), r
    assert "not judged: the note has no substance" in r["sections"].feedback


@pytest.mark.parametrize("tag", ["span hidden", "del", "s"])
def test_a_case_lines_class_hidden_or_struck_inline_leaves_the_visible_lie(tag):
    """G8/G9: the true class hidden by ``<span hidden>`` or struck, the visible class a lie: the visible case line
    calls the case a win, and the loss is not named."""
    r = _grade(_lie_hidden_by(tag))
    fb = r["consistent_with_data"].feedback
    assert not r["consistent_with_data"].passed and "c05_1024x128_fp16 win, the data says loss" in fb, fb


@pytest.mark.parametrize("where", ["### {c}: win, {f}", "> - {c}: win, {f}", "```\n{c}: win, {f}\n```",
                                   "<div hidden>\n\n{c}: win, {f}\n\n</div>", "- ~~{c}: win, {f}~~",
                                   "<details>\n\n- {c}: win, {f}\n\n</details>"])
def test_a_labelled_line_a_reader_might_not_see_is_held_to_the_data(where):
    """G2: a case line in its form as a heading, in a block quote, a code block, hidden HTML, struck text or a fold
    over an honest note claims what it says: the data contradicts it."""
    def edit(note, df):
        rows = {str(r.case_id): r for r in df.itertuples()}
        return note.replace("## Performance\n", "## Performance\n" + "".join(where.format(
            c=c, f=f"{rows[c].baseline_median_us:.1f} -> {rows[c].candidate_median_us:.1f} us") + "\n\n"
            for c in _losers(df)), 1)
    r = _grade(edit)
    fb = r["consistent_with_data"].feedback
    assert not r["consistent_with_data"].passed and "win, the data says" in fb, fb


@pytest.mark.parametrize("mark", [lambda c: c[:3] + "\u200b" + c[3:], lambda c: "\u0441" + c[1:],
                                  lambda c: c[:1] + "\ufeff" + c[1:].replace("_", "\uff3f", 1),
                                  lambda c: c.replace("_", "\u02cd")])
def test_a_case_id_with_hidden_or_lookalike_characters_is_the_case_and_is_reported(mark):
    """G3: an all-"win" table whose case ids carry a zero-width space or a Cyrillic letter: its rows are read as the
    cases' (and contradict the data), and each disguised id is reported."""
    r = _grade(_table(mark))
    fb = r["consistent_with_data"].feedback
    assert not r["consistent_with_data"].passed, fb
    assert "with characters outside ASCII (a disguised element" in fb, fb


def test_a_fold_and_plain_html_keep_full_marks():
    """A ``<details>`` fold is the note's own text (a reader opens it): the honest note keeps full marks."""
    r = _grade(lambda note, df: note)
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}
