"""Exercise 08's evidence package: the benchmark matrix and the boundary plot's data for the learner's own operator.

``check_capstone_evidence(make_predicate, make_ctx, capstone_matrix, plot_points)``:

* ``capstone_matrix() -> [(case_id, fields, expectation), ...]``, ``fields`` as CaseSpec fields
  (``{"rows": 4096, "cols": 1024, "layout": "transposed"}``), ``expectation`` one of win / neutral / loss /
  fallback, declared before anything is measured (lesson 05). The route of every case comes from the learner's own
  predicate: a case is expected to fall back exactly where that predicate sends it to the fallback; the matrix has
  at least 8 cases, at least 3 on the fast path and 2 on the fallback, rejected by at least 2 different conditions,
  eligible sizes from small (<= 4096 elements) to large (>= 2**20 elements), and at least one eligible case expected
  neutral or a loss (a matrix that expects only wins was not written to find where the fast path does not help).
* ``plot_points(results) -> {"triton": [(rows, speedup)], "fallback": [...]}`` on the learner's own cases with
  timings the check draws (``baseline_us``, ``candidate_us``, ``gpu_measurement``): each GPU-measured case on the side
  of the route it took, ``speedup = baseline_us / candidate_us``.
"""

from __future__ import annotations

import random

from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.materials import device
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, call, graded, passed, table
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.vocabulary import FALLBACK, OUTCOMES, WIN

__all__ = ["check_capstone_evidence"]

_MAX_ELEMENTS = 1 << 24
_FORBIDDEN = borrowed.kit("grading", why="that is the grader's own answer")


def _cases(matrix) -> list[tuple[str, dict, str, CaseSpec]]:
    if not isinstance(matrix, (list, tuple)) or not matrix:
        raise Fail(f"capstone_matrix must return a list of (case_id, fields, expectation), got {matrix!r:.80}")
    out, seen = [], set()
    for row in matrix:
        if not (isinstance(row, (list, tuple)) and len(row) == 3 and isinstance(row[1], dict)):
            raise Fail(f"each case is (case_id, fields dict, expectation); got {row!r:.100}")
        cid, fields, expect = str(row[0]), dict(row[1]), str(row[2])
        if cid in seen:
            raise Fail(f"case id {cid!r} appears twice")
        seen.add(cid)
        if expect not in OUTCOMES:
            raise Fail(f"{cid}: expectation {expect!r}, need one of {list(OUTCOMES)}")
        try:
            spec = CaseSpec(**{k: v for k, v in fields.items() if k != "device"})
        except TypeError as exc:
            raise Fail(f"{cid}: {fields} are not CaseSpec fields ({exc})") from None
        if spec.rows * spec.cols > _MAX_ELEMENTS:
            raise Fail(f"{cid}: {spec.rows * spec.cols} elements; keep cases at or under 2**24 = {_MAX_ELEMENTS} "
                       "on this machine")
        out.append((cid, fields, expect, spec))
    return out


def _routes(pred, make_ctx, cases):
    """case id -> (route, names of the failed conditions) by the learner's predicate."""
    out = {}
    for cid, _, _, spec in cases:
        d = pred.evaluate(make_ctx(spec.build(seed=12, device=device()).x))
        out[cid] = (d.route, tuple(getattr(d, "failed", ()) or ()))
    return out


def _matrix_problems(cases, routes) -> tuple[list[str], list[tuple]]:
    problems, rows = [], []
    for cid, _, expect, _spec in cases:
        route, failed = routes[cid]
        ok = (expect == FALLBACK) == (route == "fallback")
        rows.append((cid, route, ", ".join(failed) or "-", expect, "" if ok else "<-- expectation vs route"))
        if not ok:
            problems.append(f"{cid}: expected {expect}, but your predicate routes it to {route}")
    fast = [c for c in cases if routes[c[0]][0] != "fallback"]
    slow = [c for c in cases if routes[c[0]][0] == "fallback"]
    reasons = {f for c in slow for f in routes[c[0]][1]}
    if len(cases) < 8:
        problems.append(f"{len(cases)} cases; declare at least 8")
    if len(fast) < 3 or len(slow) < 2:
        problems.append(f"{len(fast)} cases on the fast path and {len(slow)} on the fallback; need >= 3 and >= 2")
    if len(reasons) < 2:
        problems.append(f"the fallback cases fail {sorted(reasons) or 'no'} conditions; cover at least 2 different "
                        "conditions of your predicate")
    sizes = [c[3].rows * c[3].cols for c in fast]
    if fast and (min(sizes) > 4096 or max(sizes) < 1 << 20):
        problems.append(f"eligible sizes span {min(sizes)}..{max(sizes)} elements; need one <= 4096 (launch-bound) "
                        f"and one >= {1 << 20} (memory-bound)")
    if fast and all(c[2] == WIN for c in fast):
        problems.append("every eligible case is expected to win: declare where you expect it not to help "
                        "(neutral or loss), before measuring")
    return problems, rows


def _drawn_results(cases, routes, rng) -> list[dict]:
    out = []
    for cid, _, _, spec in cases:
        base = round(spec.rows * spec.cols * rng.uniform(1e-4, 3e-4) + rng.uniform(3, 8), 3)
        out.append({"case_id": cid, "rows": spec.rows, "cols": spec.cols, "route": routes[cid][0],
                    "baseline_us": base, "candidate_us": round(base * rng.uniform(0.5, 1.3), 3),
                    "gpu_measurement": rng.random() < 0.75})
    if all(r["gpu_measurement"] for r in out):
        out[rng.randrange(len(out))]["gpu_measurement"] = False
    return out


def _plot_expected(results) -> dict:
    sides: dict = {"triton": set(), "fallback": set()}
    for r in results:
        if r["gpu_measurement"]:
            sides["fallback" if r["route"] == "fallback" else "triton"].add(
                (r["rows"], round(r["baseline_us"] / r["candidate_us"], 3)))
    return sides


def _plot_yours(out) -> dict:
    if not isinstance(out, dict) or not {"triton", "fallback"} <= set(out):
        raise Fail(f"plot_points must return {{'triton': [...], 'fallback': [...]}}, got {out!r:.100}")
    try:
        return {k: {(int(p[0]), round(float(p[1]), 3)) for p in out[k]} for k in ("triton", "fallback")}
    except (TypeError, ValueError, IndexError) as exc:
        raise Fail(f"plot_points must give (rows, speedup) pairs per route: {exc}") from None


def _what_differs(yours: dict, results: list[dict]) -> list[str]:
    """Which of the plot's rules (the exercise's: GPU measurements only, ``speedup = baseline_us / candidate_us``,
    each case on the side of the route it took, every GPU measurement) ``yours`` breaks, with the cases that show it."""
    mine = yours["triton"] | yours["fallback"]

    def point(r, inverted=False):
        base, cand = r["baseline_us"], r["candidate_us"]
        return r["rows"], round(cand / base if inverted else base / cand, 3)
    gpu = [r for r in results if r["gpu_measurement"]]
    rules = (
        ("GPU measurements only: leave out the cases whose gpu_measurement is False",
         [r for r in results if not r["gpu_measurement"] and {point(r), point(r, True)} & mine]),
        ("speedup = baseline_us / candidate_us (above 1 where the candidate is faster), not candidate over baseline",
         [r for r in gpu if point(r, True) in mine and point(r) not in mine and point(r) != point(r, True)]),
        ("each case on the side of the route it took",
         [r for r in gpu if point(r) in yours["triton" if r["route"] == "fallback" else "fallback"]]),
        ("every GPU measurement is a point", [r for r in gpu if not {point(r), point(r, True)} & mine]))
    return [f"{rule} (e.g. {', '.join(r['case_id'] for r in shown[:3])})" for rule, shown in rules if shown]


def _grade(make_predicate, make_ctx, capstone_matrix, plot_points, rng) -> list[Result]:
    pred = call(make_predicate)
    cases = _cases(borrowed.run(capstone_matrix, (), _FORBIDDEN))
    routes = _routes(pred, make_ctx, cases)
    problems, rows = _matrix_problems(cases, routes)
    if problems:
        raise Fail("\n".join(problems) + "\n" + table(rows, ("case", "your route", "fails", "expected", "")))
    for _attempt in range(2):
        results = _drawn_results(cases, routes, rng)
        yours = _plot_yours(borrowed.run(plot_points, ([dict(r) for r in results],), _FORBIDDEN))
        want = _plot_expected(results)
        if yours != want:
            rules = "; ".join(_what_differs(yours, results)) or "compare them below"
            raise Fail(f"plot points (timings drawn by this check) differ: {rules}\n  yours:    "
                       f"{ {k: sorted(v) for k, v in yours.items()} }\n  expected: "
                       f"{ {k: sorted(v) for k, v in want.items()} }")
    return [passed("ex08", "evidence_package", f"{len(cases)} predeclared cases, routed by your predicate; plot "
                   "points right on two drawn timings")]


def check_capstone_evidence(make_predicate, make_ctx, capstone_matrix, plot_points, *, show: bool = True,
                            seed: int | None = None):
    """The evidence package for your own operator: a predeclared matrix routed by your predicate, and the boundary
    plot's points for it (see the module docstring)."""
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    return graded("ex08", ("evidence_package",), _grade, make_predicate, make_ctx, capstone_matrix, plot_points, rng,
                  show=show)
