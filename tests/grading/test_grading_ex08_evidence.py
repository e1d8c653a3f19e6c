"""Exercise 08's evidence package: a predeclared matrix routed by the learner's own predicate, and the boundary plot's
points on timings the check draws."""

import pytest
import torch

import fastpath_lib
from fastpath_lib import exercises as ex

pytest.importorskip("jupytext")  # tests/solved.py reads the solutions with it

from solved import solved  # noqa: E402

fastpath_lib.use_interpreter()


def _check(matrix, plot=None, seed=0):
    s = solved("ex08")
    (r,) = ex.check_capstone_evidence(s["make_predicate"], lambda x: x, matrix, plot or s["plot_points"],
                                      show=False, seed=seed)
    assert r.part == "evidence_package"
    return r


def _solution_matrix():
    return solved("ex08")["capstone_matrix"]()


def test_the_solution_passes():
    for seed in (0,):
        r = _check(solved("ex08")["capstone_matrix"], seed=seed)
        assert r.passed, r.feedback


def _edited(edit):
    return lambda: edit(list(_solution_matrix()))


BAD_MATRICES = {
    "empty": (lambda: [], "list"),
    "fallback expected where the predicate takes the fast path": (
        _edited(lambda m: [(c, f, "fallback" if c == "mid_1024x1024" else e) for c, f, e in m]), "routes it to"),
    "a fallback case expected to win": (
        _edited(lambda m: [(c, f, "win" if e == "fallback" and "fp64" in c else e) for c, f, e in m]), "routes it to"),
    "only wins expected": (_edited(lambda m: [(c, f, "win" if e != "fallback" else e) for c, f, e in m]),
                           "every eligible case"),
    "one condition on the fallback side": (
        _edited(lambda m: [x for x in m if x[0] not in ("wide_64x16384", "transposed_1024x512")]
                + [("fp64_b", {"rows": 8, "cols": 64, "dtype": torch.float64}, "fallback")]), "2 different"),
    "no large case": (_edited(lambda m: [x for x in m if x[0] not in ("mid_1024x1024", "large_2048x1024_fp16")]
                              + [("mid_b", {"rows": 64, "cols": 1024}, "win"),
                                 ("mid_c", {"rows": 32, "cols": 1024}, "win")]), "memory-bound"),
    "too few cases": (_edited(lambda m: m[:4] + m[-2:]), "at least 8"),
}


@pytest.mark.parametrize("name", sorted(BAD_MATRICES))
def test_a_bad_matrix_fails(name):
    matrix, words = BAD_MATRICES[name]
    r = _check(matrix)
    assert not r.passed and words in r.feedback, r.feedback


def test_plot_points_by_rows_or_with_cpu_points_fail():
    def by_rows(results):
        return {"triton": [(r["rows"], r["baseline_us"] / r["candidate_us"]) for r in results if r["rows"] >= 8],
                "fallback": [(r["rows"], r["baseline_us"] / r["candidate_us"]) for r in results if r["rows"] < 8]}

    def every_point(results):
        return solved("ex08")["plot_points"]([dict(r, gpu_measurement=True) for r in results])

    for fn in (by_rows, every_point, lambda results: {"triton": [], "fallback": []}):
        assert not any(_check(solved("ex08")["capstone_matrix"], fn, seed=s).passed for s in (0, 1))


def _inverted(results):
    return {"triton": [(r["rows"], r["candidate_us"] / r["baseline_us"]) for r in results
                       if r["gpu_measurement"] and r["route"] != "fallback"],
            "fallback": [(r["rows"], r["candidate_us"] / r["baseline_us"]) for r in results
                         if r["gpu_measurement"] and r["route"] == "fallback"]}


def _every_point(results):
    return solved("ex08")["plot_points"]([dict(r, gpu_measurement=True) for r in results])


def _swapped_sides(results):
    out = solved("ex08")["plot_points"](results)
    return {"triton": out["fallback"], "fallback": out["triton"]}


@pytest.mark.parametrize("plot, rule", [
    (_inverted, "speedup = baseline_us / candidate_us"),
    (_every_point, "GPU measurements only"),
    (_swapped_sides, "on the side of the route it took"),
    (lambda results: {"triton": [], "fallback": []}, "every GPU measurement is a point"),
])
def test_wrong_plot_points_are_told_which_rule_they_break(plot, rule):
    """The feedback names the rule the points break (the exercise's: GPU rows only, baseline over candidate, each on
    its route's side), not only that they differ."""
    r = _check(solved("ex08")["capstone_matrix"], plot, seed=0)
    assert not r.passed and rule in r.feedback.splitlines()[0], r.feedback
    others = {"speedup = baseline_us", "GPU measurements only", "on the side of the route", "every GPU measurement"}
    assert not any(o in r.feedback.splitlines()[0] for o in others - {rule.split(" (")[0]} if o not in rule), r.feedback
