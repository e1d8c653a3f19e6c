"""Exercise 05: a predeclared benchmark case matrix, in the kit's words.

``my_matrix() -> list[(case_id, CaseSpec, expected, rationale)]``: ``expected`` is one of the kit's outcome words
(:data:`~fastpath_lib.grading.vocabulary.OUTCOMES`: win, neutral, loss, fallback) and ``rationale`` one line saying
why. Three parts: sizes (enough distinct cases, small and large, an M=1 decode case), layouts and dtypes, and
expectations (at least one expected win, cases expected not to improve, fallback exactly where the predicate rejects
the case on a GPU, a rationale of its own for every case). The kit's own predeclared matrix handed back, in whole
or with its rationales copied, fails.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import torch

from fastpath_lib.cases import CaseSpec
from fastpath_lib.grading import borrowed
from fastpath_lib.grading.feedback import Fail, emit, failed_parts
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.vocabulary import OUTCOMES
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["check_case_matrix", "gpu_route", "SMALL_ELEMENTS", "LARGE_ELEMENTS", "STRIDED"]

SMALL_ELEMENTS = 65536
LARGE_ELEMENTS = 4 * 1024 * 1024
STRIDED = ("row_slice", "step", "transposed", "permuted")
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


def _aligned(spec: CaseSpec) -> bool:
    el = torch.empty((), dtype=spec.dtype).element_size()
    stride = spec.cols + (spec.pad if spec.layout == "row_slice" else 0)
    return spec.offset * el % 16 == 0 and stride * el % 16 == 0 and spec.layout not in ("transposed", "permuted")


def _kit_rationales() -> set[str]:
    try:
        return {_norm(c["rationale"]) for c in json.loads(_KIT_MATRIX.read_text())["cases"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", str(text).lower()))


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


def _rule(ok: bool, text: str) -> str:
    return ("ok  " if ok else "MISSING  ") + text


def _sizes(rows) -> list[str]:
    n = len(rows)
    specs = [s for _, s, _, _ in rows]
    shapes = {(s.rows, s.cols) for s in specs}
    small = sum(s.rows * s.cols <= SMALL_ELEMENTS for s in specs)
    large = sum(s.rows * s.cols >= LARGE_ELEMENTS for s in specs)
    return [_rule(n >= 12, f">= 12 cases: {n}"), _rule(len({r[0] for r in rows}) == n, "unique case ids"),
            _rule(len(set(specs)) == n, f"no case repeated: {n - len(set(specs))} repeats"),
            _rule(len(shapes) >= 8, f">= 8 distinct shapes (rows x cols): {len(shapes)}"),
            _rule(small >= 2, f">= 2 small cases (<= {SMALL_ELEMENTS} elements): {small}"),
            _rule(large >= 2, f">= 2 large cases (>= {LARGE_ELEMENTS} elements): {large}"),
            _rule(any(s.rows == 1 for s in specs), "an M=1 decode case (one row)")]


def _layouts(rows) -> list[str]:
    specs = [s for _, s, _, _ in rows]
    n = len(specs)
    aligned = sum(_aligned(s) for s in specs)
    strided = sum(s.layout in STRIDED for s in specs)
    missing = [str(d).replace("torch.", "") for d in (torch.float32, torch.float16, torch.bfloat16)
               if d not in {s.dtype for s in specs}]
    return [_rule(aligned >= 2, f">= 2 aligned cases (16-byte pointer and row stride): {aligned}"),
            _rule(n - aligned >= 2, f">= 2 odd cases (misaligned width, pointer or stride): {n - aligned}"),
            _rule(n - strided >= 2, f">= 2 contiguous cases: {n - strided}"),
            _rule(strided >= 2, f">= 2 strided cases ({', '.join(STRIDED)}): {strided}"),
            _rule(not missing, "fp32, fp16 and bf16 cases" + (f": no {', '.join(missing)}" if missing else ""))]


def _reject_copies(rows) -> None:
    """A matrix whose rationales come from the kit's predeclared matrix is the kit's answer handed back."""
    kit = _kit_rationales()
    copied = [cid for cid, _, _, why in rows if _norm(why) in kit]
    if copied:
        raise Fail(f"{len(copied)} rationales are copied from the kit's predeclared matrix "
                   f"(fastpath_lib/bench/cases.json): {', '.join(copied[:4])}; choose and explain your own cases")


def _rationale_problems(rows) -> list[str]:
    texts = [_norm(w) for _, _, _, w in rows]
    problems = []
    for (cid, _, exp, _), t in zip(rows, texts):
        words = t.split()
        if len(words) < 4 or t in (_norm(cid), exp):
            problems.append(f"{cid}: no rationale (one line of at least four words saying why you expect {exp})")
        elif texts.count(t) > 1:
            problems.append(f"{cid}: the same rationale as another case; say why for this case")
    return problems


def _expectations(rows) -> list[str]:
    routes = {cid: gpu_route(s) for cid, s, _, _ in rows}
    wins = sum(e == "win" for _, _, e, _ in rows)
    not_improve = sum(e in ("neutral", "loss") for _, _, e, _ in rows)
    fb = sum(e == "fallback" and routes[c] == "fallback" for c, _, e, _ in rows)
    wrong = [f"{c}: expected {e} but the predicate routes it to {routes[c]}" for c, _, e, _ in rows
             if (e == "fallback") != (routes[c] == "fallback")]
    why = _rationale_problems(rows)
    return [_rule(wins >= 1, f">= 1 case expected to win: {wins}"),
            _rule(not_improve >= 2, f">= 2 cases expected not to improve (neutral/loss): {not_improve}"),
            _rule(fb >= 2, f">= 2 fallback cases (the predicate rejects them on a GPU): {fb}"),
            _rule(not wrong, "expectations agree with the predicate's routes" + "".join("\n      " + w for w in wrong)),
            _rule(not why, "a rationale of its own for every case" + "".join("\n      " + w for w in why))]


def check_case_matrix(my_matrix, *, show: bool = True):
    """``my_matrix() -> list[(case_id, CaseSpec, expected, rationale)]`` meets the coverage rules (three parts)."""
    try:
        rows = _entries(list(borrowed.run(my_matrix, (), _BORROWED)))
        _reject_copies(rows)
        results = []
        for name, lines in zip(_PARTS, (_sizes(rows), _layouts(rows), _expectations(rows))):
            ok = all(line.startswith("ok") for line in lines)
            results.append(Result("ex05", name, points_of("ex05", name), ok, "\n".join(lines)))
    except Exception as exc:  # noqa: BLE001
        results = failed_parts("ex05", _PARTS, exc)
    return emit(results, show)
