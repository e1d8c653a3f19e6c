"""Exercise 05: a predeclared benchmark case matrix, in the kit's words.

``my_matrix() -> list[(case_id, CaseSpec, expected, rationale)]``: ``expected`` is one of the kit's outcome words
(:data:`~fastpath_lib.grading.vocabulary.OUTCOMES`: win, neutral, loss, fallback) and ``rationale`` one line saying
why. The rules are the benchmark's own (:func:`fastpath_lib.bench.matrix.coverage_rules`, which the kit's matrix
meets), in three parts: sizes (enough distinct cases, small and large, an M=1 decode case), layouts and dtypes, and
expectations (at least one expected win, cases expected not to improve, fallback exactly where the predicate rejects
the case on a GPU, a rationale of its own for every case). The kit's own predeclared matrix handed back, in whole
or with its rationales copied, fails.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path


from fastpath_lib.bench.matrix import BenchCase, coverage_rules, rationale_words
from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading import borrowed
from fastpath_lib.grading.feedback import Fail, emit, failed_parts
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.vocabulary import OUTCOMES
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["check_case_matrix", "gpu_route"]

_PARTS = ("size_coverage", "layout_coverage", "expectations")
_KIT_MATRIX = Path(__file__).resolve().parents[1] / "bench" / "cases.json"
_BORROWED = borrowed.kit("bench", why="that is the kit's own predeclared matrix") + borrowed.kit(
    "grading", why="that is the grader's own answer")


def gpu_route(spec: CaseSpec) -> str:
    """The route the predicate takes for ``spec`` on a CUDA sm_90 device with the conservative row threshold.

    Rows only matter through the threshold (and, for 3-d layouts, their parity), so the case is built with at most
    9 rows and a threshold that gives the same answer: a 4096-row case costs no more than an 8-row one.
    """
    rows = spec.rows if spec.rows < 8 else 8 + spec.rows % 2
    min_rows = 8 if spec.rows >= rms.DEFAULT_CUDA_MIN_ROWS else rms.DEFAULT_CUDA_MIN_ROWS
    x, ns, w = dataclasses.replace(spec, rows=rows).build(seed=0, device="cpu").args()
    c = dataclasses.replace(rms.make_call(x, ns, w), limits=rms.Limits(min_rows=min_rows, source="CUDA default"),
                            interpret=False, device_type="cuda", capability=(9, 0))
    return rms.PREDICATE.evaluate(c).route


def _kit_rationales() -> set[str]:
    try:
        return {rationale_words(c["rationale"]) for c in json.loads(_KIT_MATRIX.read_text())["cases"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _entries(raw) -> list[tuple[str, CaseSpec, str, str]]:
    rows = []
    for e in raw:
        if not (isinstance(e, tuple) and len(e) == 4 and isinstance(e[1], CaseSpec)):
            raise Fail(f"each entry must be (case_id, CaseSpec, expected, rationale), got {e!r:.120}")
        cid, spec, exp, why = e
        if exp not in OUTCOMES:
            raise Fail(f"{cid}: expected {exp!r}; use the kit's words: {', '.join(OUTCOMES)}")
        if spec.rows * spec.cols > 64 * 1024 * 1024:
            raise Fail(f"{cid}: {spec.rows}x{spec.cols} is beyond this kit's largest case (64M elements)")
        rows.append((str(cid), spec, exp, why if isinstance(why, str) else ""))
    return rows


def _bench_cases(rows) -> list[BenchCase]:
    """The learner's entries as benchmark cases, so the benchmark's own coverage rules apply to them unchanged."""
    out = []
    for cid, spec, exp, why in rows:
        try:
            out.append(BenchCase(id=cid, family="exercise", shape=(spec.rows, spec.cols),
                                 dtype=str(spec.dtype).replace("torch.", ""), layout=spec.layout, pass_="forward",
                                 expected=exp, rationale=why.strip() or "-", pad=spec.pad, offset=spec.offset))
        except ValueError as exc:
            raise Fail(str(exc)) from None
    return out


def _lines(rules) -> list[str]:
    return [("ok  " if r.ok else "MISSING  ") + r.text for r in rules]


def _reject_copies(rows) -> None:
    """A matrix whose rationales come from the kit's predeclared matrix is the kit's answer handed back."""
    kit = _kit_rationales()
    copied = [cid for cid, _, _, why in rows if rationale_words(why) in kit]
    if copied:
        raise Fail(f"{len(copied)} rationales are copied from the kit's predeclared matrix "
                   f"(fastpath_lib/bench/cases.json): {', '.join(copied[:4])}; choose and explain your own cases")


def _expectations(rows, rules) -> list[str]:
    routes = {cid: gpu_route(s) for cid, s, _, _ in rows}
    wrong = [f"{c}: expected {e} but the predicate routes it to {routes[c]}" for c, _, e, _ in rows
             if (e == "fallback") != (routes[c] == "fallback")]
    return _lines(rules) + [("ok  " if not wrong else "MISSING  ") + "expectations agree with the predicate's routes"
                            + "".join("\n      " + w for w in wrong)]


def check_case_matrix(my_matrix, *, show: bool = True):
    """``my_matrix() -> list[(case_id, CaseSpec, expected, rationale)]`` meets the coverage rules (three parts)."""
    try:
        rows = _entries(list(borrowed.run(my_matrix, (), _BORROWED)))
        _reject_copies(rows)
        rules = coverage_rules(_bench_cases(rows), passes=False)  # the benchmark's own rules (one source)
        by_topic = {t: [r for r in rules if r.topic == t] for t in ("size", "layout", "expectations")}
        results = []
        for name, lines in zip(_PARTS, (_lines(by_topic["size"]), _lines(by_topic["layout"]),
                                        _expectations(rows, by_topic["expectations"]))):
            ok = all(line.startswith("ok") for line in lines)
            results.append(Result("ex05", name, points_of("ex05", name), ok, "\n".join(lines)))
    except Exception as exc:  # noqa: BLE001
        results = failed_parts("ex05", _PARTS, exc)
    return emit(results, show)
