"""Exercise 05: a predeclared benchmark case matrix, in the kit's words.

``my_matrix() -> list[(case_id, CaseSpec, expected, rationale)]``: ``expected`` is one of the kit's outcome words
(:data:`~fastpath_lib.grading.vocabulary.OUTCOMES`: win, neutral, loss, fallback) and ``rationale`` one line saying why.
The rules are the benchmark's own (:func:`fastpath_lib.bench.matrix.coverage_rules`, which the kit's matrix meets), in
three parts: sizes (enough distinct cases, small and large, an M=1 decode case), layouts and dtypes, and expectations
(at least one expected win, cases expected not to improve, fallback exactly where the predicate rejects the case on a
GPU, a rationale of its own for every case: no other case's rationale shares half its words, leaving out numbers and
the case's own fields). The kit's own predeclared matrix handed back, in whole or with its rationales copied or
reworded, or most of its cases kept under new words, fails; a case beyond the kit's largest (64M elements) or an
empty one costs the size part only, and a dtype or layout the benchmark does not time the layout part only. Every rule
is in the exercise's text.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from fastpath_lib.bench.matrix import COMMON_WORDS, BenchCase, coverage_rules, rationale_words
from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.report.feedback import Fail, graded
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.vocabulary import FALLBACK, OUTCOMES
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["check_case_matrix", "gpu_route"]

_PARTS = ("size_coverage", "layout_coverage", "expectations")
_KIT_MATRIX = Path(__file__).resolve().parents[2] / "bench" / "cases.json"
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


def _kit_cases() -> list[dict]:
    try:
        return list(json.loads(_KIT_MATRIX.read_text())["cases"])
    except (OSError, ValueError, KeyError, TypeError):
        return []




def _words(text: str) -> set[str]:
    return set(rationale_words(text).split()) - COMMON_WORDS


def _close_rationale(mine: str, kit: list[str]) -> bool:
    """``mine`` is a kit rationale reworded: a phrase added, a word or two dropped, words shuffled or re-punctuated.

    Three quarters of a kit rationale's words (at least four, leaving out the most common ones) are in ``mine``.
    """
    a = _words(mine)
    return any(len(a & b) >= max(4, 0.75 * len(b)) for b in map(_words, kit))


def _params(cid: str, spec: CaseSpec, exp: str) -> tuple:
    return cid, spec.rows, spec.cols, str(spec.dtype).replace("torch.", ""), spec.layout, exp


def _near(mine: tuple, kit: dict) -> bool:
    """Same dtype, layout and expectation as a kit case, and each dimension within a factor of two of it."""
    _, rows, cols, dtype, layout, exp = mine
    k_rows, k_cols = kit["shape"]
    return (dtype, layout, exp) == (kit["dtype"], kit["layout"], kit["expected"]) \
        and all(max(a, b) <= 2 * min(a, b) for a, b in ((rows, k_rows), (cols, k_cols)))


def _kit_shaped(rows, kit: list[dict]) -> list[str]:
    """Ids of the learner's cases that are kit cases (same id, or near its parameters), matched one to one."""
    left, found = list(kit), []
    for cid, spec, exp, _ in rows:
        mine = _params(cid, spec, exp)
        hit = next((k for k in left if k["id"] == cid or _near(mine, k)), None)
        if hit is not None:
            left.remove(hit)
            found.append(cid)
    return found


def _entries(raw) -> list[tuple[str, CaseSpec, str, str]]:
    rows = []
    for e in raw:
        if not (isinstance(e, tuple) and len(e) == 4 and isinstance(e[1], CaseSpec)):
            raise Fail(f"each entry must be (case_id, CaseSpec, expected, rationale), got {e!r:.120}")
        cid, spec, exp, why = e
        if exp not in OUTCOMES:
            raise Fail(f"{cid}: expected {exp!r}; use the kit's words: {', '.join(OUTCOMES)}")
        rows.append((str(cid), spec, exp, why if isinstance(why, str) else ""))
    return rows


#: The most elements a case may have: the kit's largest predeclared cases (8192x8192, 16384x4096: 64M elements).
LARGEST = 64 * 1024 * 1024


def _within_largest(rows) -> str:
    """The size rule of the largest case, as a coverage line (it costs the size part only)."""
    over = [f"{cid}: {s.rows}x{s.cols}" for cid, s, _, _ in rows if s.rows * s.cols > LARGEST]
    return ("ok  " if not over else "MISSING  ") + f"every case within this kit's largest ({LARGEST // 2 ** 20}M " \
        "elements)" + "".join(f"\n      {o} is beyond it" for o in over)


#: Each field a benchmark case validates, the part its rule belongs to, and a value it accepts.
_FIELDS = {"shape": ("size", (1, 64)), "dtype": ("layout", "float32"), "layout": ("layout", "contiguous")}


def _bench_case(cid: str, spec: CaseSpec, exp: str, why: str, **fields) -> BenchCase:
    mine = {"shape": (spec.rows, spec.cols), "dtype": str(spec.dtype).replace("torch.", ""), "layout": spec.layout}
    return BenchCase(id=cid, family="exercise", pass_="forward", expected=exp, rationale=why.strip() or "-",
                     pad=spec.pad, offset=spec.offset, **(mine | fields))


def _bench_cases(rows) -> tuple[list[BenchCase], dict[str, list[str]]]:
    """The learner's entries as benchmark cases, so the benchmark's own coverage rules apply to them unchanged, and
    per part the cases the benchmark cannot time (an empty shape, a dtype or layout it does not time): each such
    field costs its own part, and the case takes a value the benchmark accepts for the other parts' rules."""
    out, bad = [], {"size": [], "layout": []}
    for cid, spec, exp, why in rows:
        good = {f: v for f, (_, v) in _FIELDS.items()}
        fixes = {}
        for field, (topic, _) in _FIELDS.items():
            try:
                _bench_case(cid, spec, exp, why, **{f: v for f, v in good.items() if f != field})
            except ValueError as exc:
                bad[topic].append(str(exc))
                fixes[field] = good[field]
        out.append(_bench_case(cid, spec, exp, why, **fixes))
    return out, bad


def _timeable(bad: list[str], rule: str) -> list[str]:
    """A benchmark case's own rule (``BenchCase`` refuses such a case), as a coverage line where a case breaks it."""
    return ["MISSING  " + rule + "".join(f"\n      {b}" for b in bad)] if bad else []


def _lines(rules) -> list[str]:
    return [("ok  " if r.ok else "MISSING  ") + r.text for r in rules]


#: The share of the kit's predeclared cases a matrix holds (by id or parameters) from which it is the kit's matrix.
COPIED_SHARE = 0.75


def _reject_copies(rows) -> None:
    """The kit's predeclared matrix handed back, however its rationales are reworded.

    A rationale that is a kit rationale with a phrase added, words dropped or shuffled is copied; and a matrix that
    holds :data:`COPIED_SHARE` of the kit's cases or more, by id or by parameters (dtype, layout, expectation, each
    dimension within a factor of two), is the kit's matrix whatever its words say. Sharing some of the kit's shapes
    (lesson 05 shows them, and an LLM's shapes are everyone's) is no copy: the share is of the kit's matrix, not of
    the learner's.
    """
    kit = _kit_cases()
    words = [str(c.get("rationale", "")) for c in kit]
    copied = [cid for cid, _, _, why in rows if _close_rationale(why, words)]
    if copied:
        raise Fail(f"{len(copied)} rationales are copied from the kit's predeclared matrix "
                   f"(fastpath_lib/bench/cases.json), reworded or not: {', '.join(copied[:4])}; choose and explain "
                   f"your own cases")
    shaped = _kit_shaped(rows, kit)
    if kit and len(shaped) >= COPIED_SHARE * len(kit):
        raise Fail(f"your matrix holds {len(shaped)} of the {len(kit)} cases of the kit's predeclared matrix (the "
                   f"same id, or the same dtype, layout and expectation at a shape within a factor of two), e.g. "
                   f"{', '.join(shaped[:4])}: that is the kit's matrix with new words; choose your own cases (sharing "
                   f"some of its shapes is fine)")


def _expectations(rows, rules) -> list[str]:
    routes = {cid: gpu_route(s) for cid, s, _, _ in rows}
    wrong = [f"{c}: expected {e} but the predicate routes it to {routes[c]}" for c, _, e, _ in rows
             if (e == FALLBACK) != (routes[c] == "fallback")]
    return _lines(rules) + [("ok  " if not wrong else "MISSING  ") + "expectations agree with the predicate's routes"
                            + "".join("\n      " + w for w in wrong)]


def _grade(my_matrix) -> list[Result]:
    rows = _entries(list(borrowed.run(my_matrix, (), _BORROWED)))
    _reject_copies(rows)
    cases, untimeable = _bench_cases(rows)
    rules = coverage_rules(cases, passes=False)  # the benchmark's own rules (one source)
    by_topic = {t: [r for r in rules if r.topic == t] for t in ("size", "layout", "expectations")}
    size = _lines(by_topic["size"]) + [_within_largest(rows)] + _timeable(
        untimeable["size"], "every case has a row and a column or more (an empty input cannot be timed)")
    layout = _lines(by_topic["layout"]) + _timeable(
        untimeable["layout"], "every case in a dtype and a layout the benchmark times")
    results = []
    for name, lines in zip(_PARTS, (size, layout, _expectations(rows, by_topic["expectations"]))):
        ok = all(line.startswith("ok") for line in lines)
        results.append(Result("ex05", name, points_of("ex05", name), ok, "\n".join(lines)))
    return results


def check_case_matrix(my_matrix, *, show: bool = True):
    """``my_matrix() -> list[(case_id, CaseSpec, expected, rationale)]`` meets the coverage rules (three parts)."""
    return graded("ex05", _PARTS, _grade, my_matrix, show=show)
