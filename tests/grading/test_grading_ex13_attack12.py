"""Exercise 13 holds its answers to rules its text states (attack round 12, F5-F7; learner 13; issue 41): part 6 is
scored on what a program can decide (``own_commit``, ``affected``, ``pin``) and its free-prose ``justification`` is
shown back for the instructor to read, never scored, whatever it says (the prose texts of the attack rounds, true,
false or hedged, score the same); part 1's device rule (a CUDA tensor under the interpreter fails `device`) is the kit
predicate's and is stated in the exercise; part 5's feedback names the CODEOWNERS rule when the owner differs.
In-process scenario draws (about 0.1 s each)."""

import types

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex13_review import PROSE_LABEL
from fastpath_lib.grading.rules import ex13_scenarios as S
from fastpath_lib.rmsnorm import predicate

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

#: justifications that state round 12's facts (new default 1e-05; call1 fp64 and call3 fp16 change)
HONEST = [
    "The default moves from 1.19e-07 and 2.22e-16 to 1e-05; 2 callers change: call1, call3.",
    "call2 and call4 pass their own eps and do not change; call1 and call3 rely on the default, which goes from "
    "2.22e-16 and 1.19e-07 to 1e-05, so we pin them.",
    "The new default is 1e-05 instead of 2**-52 and 2**-23 (fp64 and fp16); call1 and call3 change.",
    # issue 41: honest forms the prose reader refused
    "1e-05 replaces 2**-52 and 2**-23 as the default; call1 and call3 change.",
    "call1 and call3 used 2.22e-16 and 1.19e-07 and will use 1e-05.",
    "call1 and call3 relied on the default, which was 2**-52 and 2**-23, so that it is 1e-05 for them now.",
]
#: F8, F10, F12-F14 and issue 41: wrong facts beside the right ones, every fact in every role, false prose
FALSE = {
    "F8 every id": "The default moves from 1.19e-07 and 2.22e-16 to 1e-05 for 2 callers: call1, call2, call3, call4.",
    "F12 every pair": "Numbers: from 2.22e-16 to 1.19e-07; from 2.22e-16 to 1e-06; from 2.22e-16 to 1e-05; from "
                      "1.19e-07 to 2.22e-16; from 1e-05 to 1e-06; 2 callers: call1, call3.",
    "F13 nothing moves": "Nothing moves: 1e-05 after the change is what 2.22e-16 and 1.19e-07 today already were, so "
                         "the 2 callers keep their output without a pin.",
    "no difference": "The default moves from 2**-52 and 2**-23 to 1e-05; call1 and call3 will see no difference.",
    "immune": "The default moves from 2**-52 and 2**-23 to 1e-05; call1 and call3 are immune.",
    "retracted": "The default moves from 2**-52 and 2**-23 to 1e-05 for call1 and call3. None of that is true.",
    "quoted": "A reviewer wrote: 'the default moves from 2**-52 and 2**-23 to 1e-05 for call1 and call3'. Nonsense.",
    "lorem": " ".join(["lorem"] * 10) + " 1e-05",
    "vague": "it is better this way",
}
UNAFFIRMED = [
    "Moving the default from 1.19e-07 and 2.22e-16 to 1e-05 does not change the 2 callers call1, call3; nothing to "
    "pin.",
    "If we ever moved the default from 1.19e-07 and 2.22e-16 to 1e-05, 2 callers might change, perhaps call1, call3; "
    "we are not proposing that.",
    "Would the default move from 1.19e-07 and 2.22e-16 to 1e-05 for the 2 callers call1, call3?",
]
TEXTS = [*HONEST, *FALSE.values(), *UNAFFIRMED]
SEEDS = (0, 1, 2)


def _answer(patch):
    """The solution's part 6 answer changed by ``patch(change, calls, answer)`` (which returns the new answer)."""
    base = solved("ex13")["migration"]
    return lambda change, calls: patch(change, calls, base(change, calls))


def _graded(fn, seed=0):
    (r,) = ex.check_readiness("contract_change", fn, show=False, seed=seed)
    return r


@pytest.mark.parametrize("seed", SEEDS)
def test_the_score_does_not_depend_on_the_justification(seed):
    """Issue 41: whatever the justification says (true, false, hedged or empty of facts), the same structured answer
    scores the same, and the feedback shows the text under the not-scored label."""
    right = _graded(solved("ex13")["migration"], seed)
    wrong = _graded(_answer(lambda ch, calls, out: dict(out, pin={})), seed)
    assert right.passed and not wrong.passed
    for text in TEXTS:
        for want, patch in ((right, lambda ch, calls, out, t=text: dict(out, justification=t)),
                            (wrong, lambda ch, calls, out, t=text: dict(out, pin={}, justification=t))):
            got = _graded(_answer(patch), seed)
            assert (got.passed, got.earned) == (want.passed, want.earned), (text, got.feedback)
            assert f", {PROSE_LABEL}:\n  {text!r}" in got.feedback, got.feedback
    # the text shown is the answer's for one fixed scenario: a passing answer's feedback (a saved notebook's output,
    # which nbval compares) is the same at every draw
    assert right.feedback == _graded(solved("ex13")["migration"], seed + 1).feedback


def _unaffected(calls, out):
    """A caller whose output does not change (it passes its own eps, or its default does not move)."""
    return next(c for c in calls if c["id"] not in out["pin"])


#: one structured field wrong, the others right: the field the feedback must name
ONE_FIELD_WRONG = {
    "own_commit False": ("own_commit", lambda ch, calls, out: dict(out, own_commit=False)),
    "own_commit 'no'": ("own_commit", lambda ch, calls, out: dict(out, own_commit="no")),
    "an affected id missing": ("affected", lambda ch, calls, out: dict(out, affected=out["affected"][1:])),
    "an unaffected id added": ("affected", lambda ch, calls, out: dict(
        out, affected=[*out["affected"], _unaffected(calls, out)["id"]])),
    "a pin off by a factor of 2": ("pin", lambda ch, calls, out: dict(
        out, pin={k: v * (2 if i == 0 else 1) for i, (k, v) in enumerate(out["pin"].items())})),
    "a pin off by one part in a million": ("pin", lambda ch, calls, out: dict(
        out, pin={k: v * (1 + 1e-6 if i == 0 else 1) for i, (k, v) in enumerate(out["pin"].items())})),
    "an fp64 pin 0": ("pin", lambda ch, calls, out: dict(
        out, pin={k: 0.0 if v < 1e-12 else v for k, v in out["pin"].items()})),
    "an fp64 pin 1e-12": ("pin", lambda ch, calls, out: dict(
        out, pin={k: 1e-12 if v < 1e-12 else v for k, v in out["pin"].items()})),
    "a pin missing": ("pin", lambda ch, calls, out: dict(out, pin=dict(list(out["pin"].items())[1:]))),
    "a pin for an unaffected caller": ("pin", lambda ch, calls, out: dict(
        out, pin={**out["pin"], _unaffected(calls, out)["id"]: 2.0 ** -23})),
    "pin not a dict": ("pin", lambda ch, calls, out: dict(out, pin=sorted(out["pin"].items()))),
}


@pytest.mark.parametrize("how", ONE_FIELD_WRONG)
def test_each_structured_field_wrong_alone_loses_the_part_and_is_named(how):
    field, patch = ONE_FIELD_WRONG[how]
    for seed in SEEDS:
        r = _graded(_answer(patch), seed)
        named = {line.strip() for line in r.feedback.splitlines() if "differs in:" in line}
        assert not r.passed and named == {f"differs in: {field}"}, (seed, r.feedback)
        assert PROSE_LABEL in r.feedback  # the text is still shown for the instructor


@pytest.mark.parametrize("text", [None, 3, ["call1 changes"], "", "   \n"])
def test_a_justification_that_is_not_a_non_empty_str_loses_the_part(text):
    r = _graded(_answer(lambda ch, calls, out: dict(out, justification=text)))
    assert not r.passed and "justification must be a non-empty str" in r.feedback, r.feedback


def test_an_answer_without_a_justification_loses_the_part():
    r = _graded(_answer(lambda ch, calls, out: {k: v for k, v in out.items() if k != "justification"}))
    assert not r.passed and "justification" in r.feedback, r.feedback


def test_the_instructors_guide_lists_what_is_shown_and_not_scored_under_the_feedbacks_label():
    from pathlib import Path

    guide = " ".join((Path(__file__).resolve().parents[2] / "docs" / "instructors.md").read_text().split())
    assert f'"{PROSE_LABEL}"' in guide and "exercise 13 part 6's `justification`" in guide


def test_the_solution_still_passes_contract_change_on_many_draws():
    assert all(r.passed for s in range(6)
               for r in ex.check_readiness("contract_change", solved("ex13")["migration"], show=False, seed=s))


def test_a_cuda_tensor_under_the_interpreter_fails_device_in_the_kit_and_in_the_check():
    """Learner 13: the exercise's device rule is the kit predicate's: CUDA with the interpreter on fails ``device``."""
    check = predicate.PREDICATE["device"]
    for dev, interp, fails in (("cuda", False, False), ("cpu", True, False), ("cuda", True, True),
                               ("cpu", False, True)):
        ctx = types.SimpleNamespace(device_type=dev, interpret=interp)
        assert (check.check(ctx) is not None) is fails, (dev, interp)
        call = {"device": dev, "interpreter": interp, "capability": [8, 0] if dev == "cuda" else None,
                "capturing": False, "forced": False, "dtype": "float32", "rows": 4096, "cols": 4096, "min_rows": 8}
        assert ("device" in S.expected("route_conditions", {"call": call, "capture": {}})) is fails, (dev, interp)


def test_the_owner_feedback_names_the_codeowners_rule():
    """Learner 13, ex13_m1: the first matching line taken as the owner; the feedback says which line wins."""
    import fastpath_lib.grading.checks.ex13_review as check  # noqa: F401 (the part's module, for its rule)

    base = solved("ex13")["maintenance_cost"]

    def first_match(replay, build):
        out = base(replay, build)
        return dict(out, owner="@somebody-else")
    (r,) = ex.check_readiness("maintenance_cost", first_match, show=False, seed=0)
    assert not r.passed and "the last line of CODEOWNERS that matches" in r.feedback, r.feedback


def test_the_verbose_table_shows_a_passed_parts_prose_for_the_instructor(capsys):
    """``grade -v`` prints every part's full feedback, a passed part's too: the justification an instructor reads."""
    from fastpath_lib.grading.engine.cli import NotebookGrade, PartGrade
    from fastpath_lib.grading.report.table import print_table

    r = _graded(solved("ex13")["migration"])
    assert r.passed and PROSE_LABEL in r.feedback
    g = NotebookGrade("ex13_review_readiness.ipynb", "ex13", "ok", "", 1.0,
                      [PartGrade("ex13", r.part, r.points, r.earned, r.passed, r.feedback)])
    print_table([g], verbose=False)
    assert PROSE_LABEL not in capsys.readouterr().out
    print_table([g], verbose=True)
    assert PROSE_LABEL in capsys.readouterr().out
