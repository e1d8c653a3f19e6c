"""Exercise 07 judges parts only on a note with substance, and grades concision (issue 28 item 6, issue 27 item 7):
a skeleton of headings plus the one phrase a part looks for, and a copy of vLLM's PR template, score nothing; a wordy
note loses the concision point only, and the feedback names its word count. The solution's full marks and the
untouched exercise's zero are tests/grading/test_grading.py's (it grades every notebook)."""

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex07_note import WORD_LIMIT, words_outside_details

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

HEADINGS = ("Summary", "Scope", "Eligibility and fallback", "Semantic evidence", "Mechanism", "Performance",
            "Limitations")
#: every heading the check looks for, and the one phrase its no-claims part looks for
SKELETON = "\n".join(f"## {h}\n\nnot a GPU measurement\n" for h in HEADINGS)
#: vLLM's .github/PULL_REQUEST_TEMPLATE.md, filled with nothing but the phrase and the kit's headings
VLLM_TEMPLATE = """<!-- markdownlint-disable -->
PLEASE FILL IN THE PR DESCRIPTION HERE ENSURING ALL CHECKLIST ITEMS (AT THE BOTTOM) HAVE BEEN CONSIDERED.

## Purpose

## Test Plan

## Test Result

## (Optional) Documentation Update

---
<details>
<summary> Essential Elements of an Effective PR Description Checklist </summary>

- [ ] The purpose of the PR, such as "Fix some issue (link existing issues this PR will resolve)".
- [ ] The test plan, such as providing test command.
- [ ] The test results, such as pasting the results comparison before and after, or e2e results
- [ ] (Optional) The necessary documentation update, such as updating `supported_models.md` and `examples` for a new model.
- [ ] (Optional) Release notes update. If your change is user facing, please update the release notes draft.
</details>

**BEFORE SUBMITTING, PLEASE READ <https://docs.vllm.ai/en/latest/contributing>** (anything written below this line
will be removed by GitHub Actions)
""" + SKELETON


def _by_part(results):
    return {r.part: r for r in results}


@pytest.mark.parametrize("note", [SKELETON, VLLM_TEMPLATE], ids=["skeleton plus a phrase", "vLLM's template"])
def test_a_note_without_substance_scores_nothing(note):
    results = ex.check_pr_note(lambda df, env: note, show=False)
    assert sum(r.earned for r in results) == 0, [(r.part, r.passed) for r in results]
    for r in results:
        assert "not judged: the note has no substance" in r.feedback, (r.part, r.feedback)
        assert "names 0 of this table's" in r.feedback and "with a figure of their own" in r.feedback


def test_a_wordy_note_loses_concision_only_and_is_told_its_word_count():
    base = solved("ex07")["write_pr_note"]
    padding = " ".join(["The kernel reads every row once and writes it once, as the table shows."] * 60)

    def wordy(df, env):
        return base(df, env) + "\n\n## Discussion\n\n" + padding + "\n"

    r = _by_part(ex.check_pr_note(wordy, show=False))
    assert not r["concise"].passed and f"at most {WORD_LIMIT}" in r["concise"].feedback
    n = words_outside_details(wordy(ex.synthetic_results(), ex.synthetic_environment()))
    assert n > WORD_LIMIT and f"GPU-shaped data: {n}" in r["concise"].feedback
    assert all(x.passed for k, x in r.items() if k != "concise"), {k: x.feedback for k, x in r.items()}

    def folded(df, env):  # the same words in a <details> block: concise again
        return base(df, env) + "\n\n<details><summary>Discussion</summary>\n\n" + padding + "\n\n</details>\n"

    r = _by_part(ex.check_pr_note(folded, show=False))
    assert r["concise"].passed and "at most 600 words outside <details> blocks" in r["concise"].feedback


def test_substance_is_judged_on_each_table():
    """The solution's note for the fixed table, handed back for every table: the drawn table's cases are missing."""
    fixed = solved("ex07")["write_pr_note"](ex.synthetic_results(), ex.synthetic_environment())
    results = ex.check_pr_note(lambda df, env: fixed, show=False)
    assert sum(r.earned for r in results) == 0
    assert "a GPU-shaped table drawn now: it names 0 of this table's" in results[0].feedback
