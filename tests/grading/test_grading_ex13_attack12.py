"""Exercise 13 holds its answers to rules its text states (attack round 12, F5-F7; learner 13): part 6's justification
states a fact only where its sentence affirms it (a negated or hypothetical justification states nothing) and names as
today's default only the old defaults of the callers the change affects; part 1's device rule (a CUDA tensor under the
interpreter fails `device`) is the kit predicate's and is stated in the exercise; part 5's feedback names the
CODEOWNERS rule when the owner differs. In-process string checks and scenario draws (about 0.1 s each)."""

import types

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading.checks.ex13_review import _unstated_facts
from fastpath_lib.grading.rules import ex13_scenarios as S
from fastpath_lib.rmsnorm import predicate

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

F32, F64 = 2.0 ** -23, 2.0 ** -52
#: round 12's scenario: new default 1e-05, call1 fp64 and call3 fp16 rely on the default, call2 and call4 pass eps
PIN, HELD, OTHERS = {"call1": F64, "call3": F32}, [F64, F32, F32, F32, 1e-06, 1e-05], ["call2", "call4"]

HONEST = [
    "The default moves from 1.19e-07 and 2.22e-16 to 1e-05; 2 callers change: call1, call3.",
    "call2 and call4 pass their own eps and do not change; call1 and call3 rely on the default, which goes from "
    "2.22e-16 and 1.19e-07 to 1e-05, so we pin them.",
    "The new default is 1e-05 instead of 2**-52 and 2**-23 (fp64 and fp16); call1 and call3 change.",
    "Two callers change (call1, call3): their eps was 2**-52 and 2**-23 and becomes 1e-05.",
    "No caller that passes eps is touched. For call1 and call3 the default goes from 2.22e-16 and 1.19e-07 to 1e-05.",
    # F9's sentence is true: 4 callers are in the list, and call1 and call3 change
    "The default moves from 1.19e-07 and 2.22e-16 to 1e-05; 4 callers are in the list and call1, call3 change.",
    "call1 and call3 change from 2**-52 and 2**-23 to 1e-05, while call2 and call4 keep their explicit eps.",
]
#: F8, F10, F12-F14: wrong facts beside the right ones, or every fact in every role
FALSE = {
    "F8 every id": "The default moves from 1.19e-07 and 2.22e-16 to 1e-05 for 2 callers: call1, call2, call3, call4.",
    "F10 the unaffected ids": "The default moves from 1.19e-07 and 2.22e-16 to 1e-05; 2 callers change, namely "
                              "call2, call4.",
    "F12 every pair": "Numbers: from 2.22e-16 to 1.19e-07; from 2.22e-16 to 1e-06; from 2.22e-16 to 1e-05; from "
                      "1.19e-07 to 2.22e-16; from 1e-05 to 1e-06; 2 callers: call1, call3.",
    "F13 nothing moves": "Nothing moves: 1e-05 after the change is what 2.22e-16 and 1.19e-07 today already were, so "
                         "the 2 callers keep their output without a pin.",
    "F14 blind": "From 1e-05 to 2**-23; from 1e-05 to 2**-52; from 2**-23 to 1e-05; from 2**-52 to 1e-05; 0 callers, "
                 "1 callers, 2 callers, 3 callers, 4 callers: call1, call2, call3, call4.",
    "wrong count": "The default moves from 1.19e-07 and 2.22e-16 to 1e-05; 3 callers change: call1, call3.",
}
UNAFFIRMED = [
    # F5: the change said to affect nobody
    "Moving the default from 1.19e-07 and 2.22e-16 to 1e-05 does not change the 2 callers call1, call3; nothing to "
    "pin.",
    # F6: a hypothetical, withdrawn
    "If we ever moved the default from 1.19e-07 and 2.22e-16 to 1e-05, 2 callers might change, perhaps call1, call3; "
    "we are not proposing that.",
    "It is a myth that the default moves from 1.19e-07 and 2.22e-16 to 1e-05 for the 2 callers call1, call3.",
    "Suppose the default moved from 1.19e-07 and 2.22e-16 to 1e-05; call1 and call3 change.",
    "Would the default move from 1.19e-07 and 2.22e-16 to 1e-05 for the 2 callers call1, call3?",
]


@pytest.mark.parametrize("text", HONEST)
def test_an_affirmed_justification_states_its_facts(text):
    assert _unstated_facts(text, 1e-05, PIN, HELD, OTHERS) == []


@pytest.mark.parametrize("how", FALSE)
def test_a_justification_with_a_false_fact_beside_the_true_ones_is_refused(how):
    assert _unstated_facts(FALSE[how], 1e-05, PIN, HELD, OTHERS)


@pytest.mark.parametrize("text", UNAFFIRMED)
def test_a_negated_or_hypothetical_justification_states_nothing(text):
    misses = _unstated_facts(text, 1e-05, PIN, HELD, OTHERS)
    assert misses and "state it affirmatively" in misses[-1], misses


def test_an_old_default_of_a_dtype_the_change_does_not_touch_is_false():
    """F7: with the new default 2**-23 only fp64 callers change; fp32's 1.19e-07 named as an old default is false."""
    pin, held = {"call1": F64}, [F64, F32, F32]
    dumped = "The default moves from 1.19e-07 and from 2.22e-16 to 1.19e-07; 1 callers change: call1."
    assert any("stated as today's default" in m for m in _unstated_facts(dumped, F32, pin, held))
    honest = "The default moves from 2.22e-16 to 1.19e-07 for call1; fp32 callers already use 1.19e-07."
    assert _unstated_facts(honest, F32, pin, held) == []


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
