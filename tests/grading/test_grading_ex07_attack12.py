"""Exercise 07 reads what a note asserts as it renders (attack round 12, F1-F4 and the honest notes it refused): an
HTML comment hides what it holds, every table row naming a case is a claim wherever it stands, a claim its sentence
negates, denies, asks or supposes anywhere asserts nothing (and a denial of the data's outcome is an inconsistency),
comparative words ("beats", "got worse") claim outcomes, figures given ``respectively`` go to their cases in order,
and "inside its measured spread: no significant difference" is neutral. Every honest phrasing below keeps full marks
on the fixed and on the drawn table; every attack loses consistent_with_data with feedback naming the fix.
In-process: each test runs the check (about 0.3 s)."""

import re

import pytest

from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

_ITEM = re.compile(r"([a-z]\d\d\w*) \(")


def _figs(r):
    b, c = float(r["baseline_median_us"]), float(r["candidate_median_us"])
    return {"b": f"{b:.4g}", "c": f"{c:.4g}", "pct": f"{100 * (c / b - 1):+.1f}", "ratio": f"{c / b:.2f}",
            "diff": f"{abs(c - b):.3g}", "spread": f"{float(r['baseline_spread_us']):.4g}"}


def _rewritten(say_loss=None, say_neutral=None, *, together=None, extra="", edit=None):
    """The solution's note, each loss and each neutral case said as ``say_loss`` / ``say_neutral`` (a format of the
    case id ``id`` and its figures, one list item each), or all of an outcome's cases in one item (``together``:
    outcome -> function of the ids and rows); ``extra`` added to the summary; ``edit`` applied last (GPU data)."""
    def write(df, env):
        note = solved("ex07")["write_pr_note"](df, env)
        if env.get("device") != "cuda":
            return note
        rows = {str(r["case_id"]): r for _, r in df.iterrows()}
        out = []
        for line in note.splitlines():
            kind = "loss" if line.startswith("- loss: ") else "neutral" if line.startswith("- neutral") else None
            say = {"loss": say_loss, "neutral": say_neutral}.get(kind)
            if kind and together and kind in together:
                out.append("- " + together[kind](_ITEM.findall(line), rows))
            elif kind and say:
                out += ["- " + say.format(id=c, **_figs(rows[c])) for c in _ITEM.findall(line)]
            else:
                out.append(line)
        note = "\n".join(out).replace("## Scope", f"{extra}\n\n## Scope", 1) if extra else "\n".join(out)
        return edit(note, df) if edit else note
    return write


def _grade(write):
    return {r.part: r for r in ex.check_pr_note(write, show=False)}


def _respectively(word):
    return lambda ids, rows: (f"{' and '.join(ids)} {'is' if len(ids) == 1 else 'are'} {word} ("
                              + " and ".join(f"{_figs(rows[c])['b']} -> {_figs(rows[c])['c']} us" for c in ids)
                              + ", respectively).")


#: honest ways to say each loss and each neutral case, in varied words and structures (round 12's two refusals first)
HONEST = {
    "respectively": dict(together={"loss": _respectively("slower"), "neutral": _respectively("within the noise")}),
    "inside its spread": dict(say_neutral="{id} changes by {pct} %, which is inside its measured spread of {spread} us:"
                                          " no significant speed difference."),
    "regresses": dict(say_loss="{id} regresses from {b} to {c} us."),
    "got worse": dict(say_loss="{id} got worse ({b} vs {c} us)."),
    "trails": dict(say_loss="{id} trails F.rms_norm ({c} vs {b} us, {pct} %)."),
    "as expected": dict(say_loss="As expected for its shape, {id} is slower ({pct} %)."),
    "relative clause": dict(say_loss="{id}, which we had hoped would win, loses ({b} -> {c} us)."),
    "not X but Y": dict(say_loss="{id} is not faster but slower, by {pct} % ({b} -> {c} us)."),
    "ratio": dict(say_loss="{id} is {ratio}x slower than the fallback ({b} -> {c} us)."),
    "colon": dict(say_loss="We measured {id} at {c} us against {b} us: a loss.",
                  say_neutral="We measured {id} at {c} us against {b} us: within the noise."),
    "no significant difference": dict(say_neutral="{id} shows no significant difference ({pct} %)."),
    "unchanged within its band": dict(say_neutral="Within its noise band, {id} is unchanged ({b} vs {c} us)."),
    "lags behind": dict(say_loss="{id} lags behind the fallback by {diff} us ({b} -> {c} us)."),
    "expected but": dict(say_loss="{id} was expected to win but is slower ({b} -> {c} us)."),
}


@pytest.mark.parametrize("how", HONEST)
def test_an_honest_phrasing_keeps_full_marks(how):
    r = _grade(_rewritten(**HONEST[how]))
    assert all(x.passed for x in r.values()), {k: x.feedback for k, x in r.items() if not x.passed}


def _hidden(note, df):
    """F1: a visible lie and a visible table; the honest note in an HTML comment."""
    rows = "\n".join(f"| {c} | every shape | 1.50x faster |" for c in df["case_id"])
    return ("The Triton fast path beats F.rms_norm on every shape we timed.\n\n| case | shapes | result |\n"
            f"|---|---|---|\n{rows}\n\n<!--\n{note}\n-->\n")


def _second_table(note, df):
    """F2: a second, false table in the summary."""
    rows = "\n".join(f"| {c} | triton | 1.50x faster | win |" for c in df["case_id"])
    return note.replace("\n## Scope", f"\n\n| case | route | speed | class |\n|---|---|---|---|\n{rows}\n\n## Scope", 1)


def _myth_counts(note, df):
    return "\n".join("It is untrue that o" + ln[1:] if ln.startswith("Of ") else ln for ln in note.splitlines())


#: attack -> (how the note is written, what the feedback must say)
ATTACKS = {
    "F2 second table": (dict(edit=_second_table), ["gives route triton, the data fallback", "the data says loss"]),
    "F3 myth": (dict(say_loss="It is a myth that {id} is slower ({b} -> {c} us, {pct} %); it beats the baseline.",
                     say_neutral="It is a myth that {id} is within the noise ({b} -> {c} us); it beats the baseline.",
                     extra="In short, the kernel improves on F.rms_norm everywhere and no shape got worse.",
                     edit=_myth_counts),
                ["the note calls it win", "improves on F.rms_norm everywhere", "say where it is slower"]),
    "F3 denial": (dict(say_loss="It is a myth that {id} is slower ({b} -> {c} us, {pct} %)."),
                  ["denies that it is loss", "state it affirmatively"]),
    "F4 interjection": (dict(say_loss="{id} is not, whatever the raw table suggests to a hasty reader, slower ({b} "
                                      "-> {c} us, {pct} %).",
                             say_neutral="{id} is not, whatever the raw table suggests to a hasty reader, within the "
                                         "noise ({b} -> {c} us)."), ["not named so", "state it affirmatively"]),
    "hedged": (dict(say_loss="{id} might perhaps be slower ({b} -> {c} us)."), ["state it affirmatively"]),
    "supposed": (dict(say_loss="Perhaps {id} is slower ({b} -> {c} us)."), ["state it affirmatively"]),
    "conditional": (dict(say_loss="{id} is slower ({b} -> {c} us) if the cache is cold."), ["state it affirmatively"]),
    "inline comment": (dict(say_loss="A loss: <!-- {id} is slower ({b} -> {c} us). --> see the table."),
                       ["not named so"]),
    "asked": (dict(say_loss="Is {id} slower ({b} -> {c} us)?"), ["state it affirmatively"]),
    "comparative": (dict(say_loss="{id} beats F.rms_norm ({b} -> {c} us)."), ["the note calls it win"]),
    "no shape got worse": (dict(extra="No shape got worse."), ["say where it is slower"]),
    # F4b: claims with no case id, and a case given two outcomes
    "labelled count": (dict(extra="Wins: 12 of 12 cases."), ["counts 12 win cases"]),
    "all cases win": (dict(extra="All cases win."), ["'All cases win.'", "say where it is slower"]),
    "improves every case": (dict(extra="The fast path improves every case by 1.5x."), ["say where it is slower"]),
    "two outcomes": (dict(say_loss="{id} is slower than the fallback would suggest ({b} -> {c} us); it is quicker "
                                   "than the baseline."), ["the note calls it win and loss"]),
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_loses_consistency_with_feedback_naming_the_fix(attack):
    how, told = ATTACKS[attack]
    r = _grade(_rewritten(**how))
    fb = r["consistent_with_data"].feedback
    assert not r["consistent_with_data"].passed and all(t in fb for t in told), fb


@pytest.mark.parametrize("edit", [_hidden, lambda note, df: f"## Summary\n\n<!-- {note} -->\n"])
def test_a_comment_hides_headings_sentences_and_tables_from_every_part(edit):
    """F1: the honest note in an HTML comment (on many lines, or inline), a lie or nothing visible: the note has no
    substance a reader sees, and every part is refused."""
    r = _grade(_rewritten(edit=edit))
    assert not any(x.passed for x in r.values()) and "no substance" in r["consistent_with_data"].feedback, r


def test_the_visible_lie_of_f1_is_read_as_lies():
    """F1's visible paragraph and table, beside an honest visible note: each row and the paragraph contradict the
    data."""
    r = _grade(_rewritten(edit=lambda note, df: note + "\n\n" + _hidden("", df)))
    fb = r["consistent_with_data"].feedback
    assert "beats F.rms_norm on every shape" in fb and "the data says loss" in fb and "'1.50x'" in fb, fb


def test_a_performance_table_in_a_comment_lists_no_case():
    """The performance section lists its cases only where they render: a table in a comment lists none."""
    def hide(note, df):
        head, rest = note.split("<details>", 1)
        table, tail = rest.split("</details>", 1)
        return f"{head}<!--{table}-->{tail}"
    r = _grade(_rewritten(edit=hide))
    assert not r["sections"].passed and "does not list this table's cases" in r["sections"].feedback, r
    assert "not in the performance table" in r["consistent_with_data"].feedback
