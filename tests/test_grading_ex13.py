"""Exercise 13 (review readiness): the solution passes every part on scenarios drawn anew, and trivial, borrowed,
memorised and plausible-but-wrong answers fail the part they answer."""

import math
import random

import pytest

from fastpath_lib import exercises as ex
from fastpath_lib.grading import ex13_scenarios
from fastpath_lib.grading.ex13_review import PARTS
from fastpath_lib.grading.registry import EXERCISES

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import earned, solved  # noqa: E402

#: part -> the solution's function for it
FN = {"route_conditions": "failed_conditions", "modes_preserved": "preserved", "test_kinds": "catching_test",
      "ci_or_schedule": "catching_test", "why_not_baseline": "why_not", "workload_replay": "replay",
      "compile_cost": "cold_start", "fallback_and_owner": "respond", "boundary_plot": "plot_points",
      "mechanism": "mechanism", "contract_change": "migration", "readability": "choose",
      "review_response": "answer_review"}
SEEDS = (0, 1, 2)


def _sol(part):
    return solved("ex13")[FN[part]]


def _passes(part, fn, seed=None) -> bool:
    (r,) = ex.check_readiness(part, fn, show=False, seed=seed)
    assert r.exercise == "ex13" and r.part == part
    return r.passed


def test_parts_are_the_registered_ones():
    assert PARTS == tuple(p for p, _ in EXERCISES["ex13"])


def test_the_solution_passes_every_part_on_many_draws():
    for seed in range(12):
        for part in PARTS:
            (r,) = ex.check_readiness(part, _sol(part), show=False, seed=seed)
            assert r.passed, (seed, part, r.feedback)
    assert all(_passes(p, _sol(p)) for p in PARTS)  # and on a draw from the system's randomness


def test_draws_differ_between_calls():
    for part in PARTS:
        assert ex13_scenarios.draw(part, random.Random(1)) != ex13_scenarios.draw(part, random.Random(2)), part


def _raise(*_):
    raise NotImplementedError


def test_the_stub_scores_zero_with_not_implemented():
    for part in PARTS:
        (r,) = ex.check_readiness(part, _raise, show=False)
        assert not r.passed and "not implemented" in r.feedback, part
    assert earned(ex.check_readiness("no_such_part", _sol("mechanism"), show=False)) == 0


#: part -> constant answers (the first few answers a learner might hand in without a rule)
TRIVIAL = {
    "route_conditions": [lambda c: [], lambda c: ["cuda_graph_capture", "architecture"]],
    "modes_preserved": [lambda r: True, lambda r: False],
    "test_kinds": [lambda i: (k, "ci") for k in ex13_scenarios.TEST_KINDS],
    "ci_or_schedule": [lambda i: ("compile", "ci"), lambda i: ("sweep", "scheduled")],
    "why_not_baseline": [lambda t: {"beats_compiled": [], "verdict": "compile it"},
                         lambda t: {"beats_compiled": [c["case_id"] for c in t["cases"]], "verdict": "fast path"}],
    "workload_replay": [lambda t: {"baseline_total_us": 0, "fast_total_us": 0, "saved_share": 0,
                                   "unmeasured_calls": 0}],
    "compile_cost": [lambda c: {"binaries": 0, "compile_s": 0.0, "cubin_bytes": 0}],
    "fallback_and_owner": [lambda i: {"action": "switch", "switch": "FASTPATH_FORCE_FALLBACK=1", "owner": "@ada"},
                           lambda i: {"action": "none", "switch": "", "owner": "@ada"}],
    "boundary_plot": [lambda r, t: {"triton": [], "fallback": []}],
    "mechanism": [lambda c: {"bytes": 0, "gbps": 0.0, "copy_fraction": 0.0}],
    "contract_change": [lambda ch, calls: {"own_commit": True, "affected": [], "pin": {}, "justification": "x"}],
    "readability": [lambda p: "a", lambda p: "b"],
    "review_response": [lambda c, r: a for a in ex13_scenarios.ACTIONS],
}


@pytest.mark.parametrize("part", PARTS)
def test_trivial_answers_fail(part):
    for fn in TRIVIAL[part]:
        assert not any(_passes(part, fn, s) for s in SEEDS), part


@pytest.mark.parametrize("part", PARTS)
def test_borrowed_grader_rule_fails(part):
    keys = {"boundary_plot": ("results", "threshold"), "contract_change": ("change", "calls"),
            "review_response": ("comment", "results")}

    def borrowed(*args):
        scenario = dict(zip(keys[part], args)) if part in keys else args[0]
        return ex13_scenarios.expected(part, scenario)

    (r,) = ex.check_readiness(part, borrowed, show=False, seed=0)
    assert not r.passed and "grader's own rule" in r.feedback, (part, r.feedback)


@pytest.mark.parametrize("where", ["fastpath_lib.bench.timing", "fastpath_lib.rmsnorm.cost"])
def test_the_kits_bytes_model_is_refused_for_the_mechanism_part(where):
    """RMSNorm's bytes model lives in ``rmsnorm/cost.py`` and is re-exported by ``bench.timing``: through either name
    it is the kit's answer, not the learner's."""
    import importlib

    import torch

    model = importlib.import_module(where).bytes_moved

    def borrowed(sc):
        n = model(sc["rows"], sc["cols"], getattr(torch, sc["dtype"]), sc["pass"], weight=sc["weight"])
        gbps = n / (sc["median_us"] * 1e-6) / 1e9
        return {"bytes": n, "gbps": gbps, "copy_fraction": gbps / sc["copy_gbps"]}

    (r,) = ex.check_readiness("mechanism", borrowed, show=False, seed=0)
    assert not r.passed and "kit's answer" in r.feedback, r.feedback


def test_answers_recorded_for_one_draw_fail_on_another():
    for part in ("route_conditions", "readability", "review_response", "modes_preserved"):
        def record(seed):
            answers = []
            fn = _sol(part)
            for sc in ex13_scenarios.draw(part, random.Random(seed)):
                args = (sc["comment"], sc["results"]) if part == "review_response" else (sc,)
                answers.append(fn(*args))
            return answers

        recorded = record(0)
        rng_answers = iter(recorded * 3)
        assert not _passes(part, lambda *a: next(rng_answers), seed=5), part


def _mod(part, patch):
    """The solution's function for ``part`` with its answer changed by ``patch(scenario args, answer)``."""
    base = _sol(part)
    return lambda *a: patch(a, base(*a))


#: plausible wrong rules, each one the lesson warns about
WRONG = {
    "route_conditions": [_mod("route_conditions", lambda a, out: [c for c in out if c != "cuda_graph_capture"]),
                         _mod("route_conditions", lambda a, out: [c for c in out if c != "architecture"])],
    "modes_preserved": [lambda r: (all(math.isclose(x, y, rel_tol=1e-5) for x, y in zip(r["run_a"], r["run_b"]))
                                   if r["mode"] == "deterministic" else _sol("modes_preserved")(r)),
                        lambda r: (_sol("modes_preserved")(dict(r, graph_breaks=0)) if r["mode"] == "compile"
                                   else _sol("modes_preserved")(r)),
                        lambda r: (r["fast_path_dtype"] == r["input_dtype"] if r["mode"] == "autocast"
                                   else _sol("modes_preserved")(r))],
    "test_kinds": [_mod("test_kinds", lambda a, out: ("guard_band" if out[0] == "sanitizer" else out[0], out[1]))],
    "ci_or_schedule": [_mod("ci_or_schedule", lambda a, out: (out[0], "ci"))],
    "why_not_baseline": [lambda t: {"beats_compiled": [c["case_id"] for c in t["cases"]
                                                       if c["fast_us"] < c["baseline_us"] * (1 - c["band"])],
                                    "verdict": "fast path"}],
    "workload_replay": [lambda t: _sol("workload_replay")([dict(r, fast_us=r["fast_us"] or r["baseline_us"])
                                                           for r in t])],
    "compile_cost": [lambda c: _sol("compile_cost")(dict(c, warm_disk_cache=False)),
                     lambda c: _sol("compile_cost")(dict(c, calls=[dict(x, **{"pass": "forward"})
                                                                   for x in c["calls"]]))],
    "fallback_and_owner": [_mod("fallback_and_owner", lambda a, out: dict(out, owner="the team")),
                           _mod("fallback_and_owner", lambda a, out: dict(out, owner="@TBD")),
                           _mod("fallback_and_owner", lambda a, out: dict(out, owner="@oncall-" + a[0]["arch"])),
                           _mod("fallback_and_owner", lambda a, out: dict(out, switch="revert the PR")),
                           _mod("fallback_and_owner", lambda a, out: dict(
                               out, action="retune" if a[0]["kind"] == "slowdown" else out["action"]))],
    "boundary_plot": [lambda r, t: {"triton": [(x["rows"], x["baseline_us"] / x["candidate_us"]) for x in r
                                               if x["rows"] >= t and x["gpu_measurement"]],
                                    "fallback": [(x["rows"], x["baseline_us"] / x["candidate_us"]) for x in r
                                                 if x["rows"] < t and x["gpu_measurement"]]},
                      lambda r, t: _sol("boundary_plot")([dict(x, gpu_measurement=True) for x in r], t)],
    "mechanism": [lambda c: _sol("mechanism")(dict(c, **{"pass": "forward"}))
                  if c["pass"] == "backward" else dict(_sol("mechanism")(c), bytes=0)],
    "contract_change": [lambda ch, calls: _sol("contract_change")({"default_eps": -1.0}, calls) | {
                            "justification": _sol("contract_change")(ch, calls)["justification"]},
                        _mod("contract_change", lambda a, out: dict(out, own_commit=False)),
                        _mod("contract_change", lambda a, out: dict(out, justification="it is better this way"))],
    "readability": [lambda p: "a" if p["a"]["median_us"] < p["b"]["median_us"] else "b"],
    "review_response": [_mod("review_response", lambda a, out: "show_raw_samples" if out == "reclassify" else out),
                        _mod("review_response", lambda a, out: "add_case" if out == "point_to_case" else out)],
}


@pytest.mark.parametrize("part", PARTS)
def test_plausible_wrong_rules_fail(part):
    for i, fn in enumerate(WRONG[part]):
        assert not any(_passes(part, fn, s) for s in SEEDS), (part, i)


#: parts whose answer is one of a few values: every value occurs in every draw, by construction (issue 28, item 6)
SMALL = {"readability": {"a", "b"}, "review_response": set(ex13_scenarios.ACTIONS), "modes_preserved": {True, False},
         "fallback_and_owner": {"switch", "retune", "none"}}


def test_every_answer_of_a_small_answer_space_occurs_in_every_draw():
    for seed in range(40):
        for part, answers in SMALL.items():
            got = {ex13_scenarios.expected(part, sc) for sc in ex13_scenarios.draw(part, random.Random(seed))}
            assert got == answers, (seed, part, got)
        pairs = ex13_scenarios.draw("readability", random.Random(seed))
        wins = {ex13_scenarios.expected("readability", p) for p in pairs if not p[
            ex13_scenarios.expected("readability", p)]["readable"]}
        assert wins == {"a", "b"}, seed  # the unreadable one is the answer on either side
    for seed in range(6):  # so the constant, which passed 1 time in 64 before, never does
        assert not _passes("readability", lambda pair: "a", seed)
        assert not _passes("review_response", lambda comment, results: {
            "doubt_win": "show_raw_samples", "missing_case": "point_to_case",
            "why_not_compile": "show_compiled"}[comment["kind"]], seed)


def test_route_conditions_follow_the_capture_json_rule():
    """Part 1 follows lesson 06: a captured call keeps the fast path where capture.json records a passed test."""
    def capture_always_fails(call):
        return sorted(set(_sol("route_conditions")(call)) | ({"cuda_graph_capture"} if call["capturing"] else set()))

    for seed in range(6):
        assert _passes("route_conditions", _sol("route_conditions"), seed)
        assert not _passes("route_conditions", capture_always_fails, seed)
