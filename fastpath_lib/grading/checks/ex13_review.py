"""Exercise 13: review readiness, six parts, each about a real artefact of the kit rather than a table of phrases.

``check_readiness(part, fn)`` calls the learner's ``fn`` on scenarios drawn at that call
(:mod:`~fastpath_lib.grading.rules.ex13_scenarios`: a call and the kit's ``capture.json``, a pytest JUnit report and the
claims of a PR note, a ``results.csv`` table, review comments on a PR note, lesson 06's replay and build tables, a
change of the default ``eps`` and its callers), and compares each answer with the grader's rule. A part passes when
every scenario is answered right; every answer of a small answer space, and each of part 1's conditions failing
alone, occurs in every draw, so a function that returns one constant, ignores a condition or answers recorded for the
examples the notebook shows fails. The grader's own rules (the scenario module) and the kit's answers (the predicate
and ``capture.json``'s reader, the bytes model, the results classifier) may not be called. Free prose is read by a
person, not scored: part 6's ``justification`` is shown back under :data:`PROSE_LABEL`.

>>> [r.passed for r in check_readiness("review_comments", lambda comments, cases: {}, show=False)]
[False]
"""

from __future__ import annotations

import copy
import math
import random

from fastpath_lib.grading.report.feedback import Fail, graded, part, real, truth
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.rules.ex13_scenarios import ACTIONS, SWITCHES, VERDICTS, draw, expected

__all__ = ["check_readiness", "PARTS", "CONTRACT_RULE", "PROSE_RULE", "OWNER_RULE", "DEVICE_RULE", "STATED",
           "PROSE_LABEL"]

#: The parts, in the notebook's order (the registry's ``ex13`` entry lists the same names).
PARTS = ("route_conditions", "test_report", "results_table", "review_comments", "maintenance_cost",
         "contract_change")

_FORBIDDEN = borrowed.kit("grading", why="that is the grader's own rule, check or answer key") + borrowed.kit(
    "bench/timing.py", "bytes_moved", why="the part asks you to apply the bytes model yourself") + borrowed.kit(
    "rmsnorm/cost.py", "bytes_moved", why="the part asks you to apply the bytes model yourself") + borrowed.kit(
    "rmsnorm/predicate.py", why="the part asks you to apply the conditions yourself") + borrowed.kit(
    "rmsnorm/capture.py", why="the part asks you to read capture.json yourself") + borrowed.kit(
    "bench/analysis.py", "classify", "summary_table", "boundary_table", "outcome_counts",
    why="that is the kit's reading of a results table; use outcome and noise_band")
_SHOWN = 4  # mismatches listed in the feedback


def _close(a, b, rel=1e-6, floor=1e-9) -> bool:
    """``a`` is a real number within ``rel`` of ``b`` (or within ``floor`` of it: 0 for an eps, itself far below
    1e-9)."""
    a = real(a)  # any real number: a numpy or 0-d tensor result counts, a bool does not
    return a is not None and math.isclose(a, float(b), rel_tol=rel, abs_tol=floor)


def _brief(obj, limit=200) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _as_set(out, what: str) -> frozenset:
    if isinstance(out, (str, dict)) or not hasattr(out, "__iter__"):
        raise Fail(f"{what} must be a list or set of names, got {type(out).__name__}: {_brief(out)}")
    return frozenset(str(x) for x in out)


def _mapping(out, keys, what: str) -> dict:
    if not isinstance(out, dict):
        raise Fail(f"{what} must return a dict with keys {list(keys)}, got {type(out).__name__}: {_brief(out)}")
    missing = [k for k in keys if k not in out]
    if missing:
        raise Fail(f"{what}'s dict has no {missing} (it needs {list(keys)})")
    return out


def _per_id(out, want: dict, allowed: tuple, what: str) -> tuple[dict, dict, bool]:
    out = _mapping(out, tuple(want), what)
    bad = sorted({str(v) for v in out.values()} - set(allowed))
    if bad:
        raise Fail(f"{what} answers {bad}: use one of {list(allowed)}")
    wrong = {k: out[k] for k in want if out[k] != want[k]}
    return wrong, {k: want[k] for k in wrong}, not wrong


def _run(fn, *args, allow_none=False):
    return borrowed.run(fn, copy.deepcopy(args), _FORBIDDEN, allow_none=allow_none)


#: How part 6's fields are compared: ``own_commit`` true, ``affected`` the exact set, ``pin`` the exact map (each eps
#: within a relative 1e-9: an absolute floor would take any tiny value for fp64's ``2**-52``). Its ``justification``
#: is not among them: no program can tell whether prose is true.
_CONTRACT_FIELDS = {
    "own_commit": lambda yours, want: truth(yours) is True,
    "affected": lambda yours, want: yours == want,
    "pin": lambda yours, want: isinstance(yours, dict) and set(yours) == set(want)
    and all(_close(yours[k], v, 1e-9, 0.0) for k, v in want.items()),
}
#: What part 6's feedback shows its justification under: a person reads it; the score does not depend on it.
PROSE_LABEL = "for your instructor to read (not scored: no program can tell whether prose is true)"


def _fields_that_differ(yours: dict, want: dict) -> list[str]:
    """Part 6's fields in ``yours`` that :data:`_CONTRACT_FIELDS` does not accept."""
    return [k for k, same in _CONTRACT_FIELDS.items() if not same(yours[k], want[k])]


def _grade_one(name: str, fn, sc):
    """``(yours, want, ok)`` for one scenario of part ``name``."""
    want = expected(name, sc)
    if name == "route_conditions":
        yours = _as_set(_run(fn, sc["call"], sc["capture"], allow_none=True) or (), "failed_conditions's answer")
        return sorted(yours), sorted(want), yours == want
    if name == "test_report":
        return _per_id(_run(fn, sc["report"], sc["claims"]), want, VERDICTS, "read_report")
    if name == "results_table":
        out = _mapping(_run(fn, sc["csv"]), ("suspect", "beats_compiled", "verdict"), "read_results")
        yours = {"suspect": _as_set(out["suspect"], "suspect"),
                 "beats_compiled": _as_set(out["beats_compiled"], "beats_compiled"), "verdict": out["verdict"]}
        show = {k: sorted(v) if isinstance(v, frozenset) else v for k, v in yours.items()}
        return show, {k: sorted(v) if isinstance(v, frozenset) else v for k, v in want.items()}, yours == want
    if name == "review_comments":
        return _per_id(_run(fn, sc["comments"], sc["cases"]), want, ACTIONS, "answer_review")
    if name == "maintenance_cost":
        out = _mapping(_run(fn, sc["replay"], sc["build"]), (*want, "switch"), "maintenance_cost")
        ok = all(out[k] == want[k] if k == "owner" else real(out[k]) == want[k]
                 if k in ("unmeasured_calls", "binaries", "cubin_bytes") else _close(out[k], want[k]) for k in want)
        if out["switch"] not in SWITCHES:
            raise Fail(f"switch {out['switch']!r} is not the kit's switch off the fast path (the environment "
                       f"variable or the context manager: one of {list(SWITCHES)})")
        shown = {k: v if k == "owner" or real(v) is None or real(v).is_integer() else round(real(v), 6)
                 for k, v in ((k, out[k]) for k in want)}
        return shown, {k: v if k == "owner" else round(v, 6) for k, v in want.items()}, ok
    if name == "contract_change":
        out = _mapping(_run(fn, sc["change"], sc["calls"]), ("own_commit", "affected", "pin", "justification"),
                       "migration")
        if not isinstance(out["justification"], str) or not out["justification"].strip():
            raise Fail(f"justification must be a non-empty str, a sentence or two for your instructor to read (it "
                       f"is not scored), got {type(out['justification']).__name__}: {_brief(out['justification'])}")
        yours = {"own_commit": out["own_commit"], "affected": sorted(_as_set(out["affected"], "affected")),
                 "pin": out["pin"]}
        want = {"own_commit": True, "affected": sorted(want["affected"]), "pin": want["pin"]}
        return yours, want, not _fields_that_differ(yours, want)
    raise Fail(f"exercise 13 has no part {name!r}")


#: What part 6 scores, and that its free prose is read by a person (the exercise states both).
CONTRACT_RULE = ("The check scores `own_commit`, `affected` and `pin` only: `own_commit` must be `True` (lesson 07: an "
                 "intentional contract change is a commit of its own, never folded into the fast path's), `affected` "
                 "must be exactly the callers whose output changes, and `pin` must give exactly those callers their "
                 "old eps (compared as numbers, within a relative 1e-9)")
PROSE_RULE = ("`justification` (a non-empty `str`) is a sentence or two for the reviewer, and your instructor reads "
              "it: the check shows it back in its feedback and does not score it, since no program can tell whether "
              "prose is true")
#: Whom part 5 takes as the owner: the scenario's CODEOWNERS file is the only thing that says who owns the code.
OWNER_RULE = ("the person the scenario's CODEOWNERS file names for the kernel's file: `build[\"codeowners\"]` read "
              "for `build[\"kernel_file\"]` as GitHub reads it (a line starting with `#` is a comment; every other "
              "line is a pattern and a handle; `*` matches every file, `*.EXT` every file whose name ends in `.EXT`, "
              "`/DIR/` every file under the directory `DIR` at the repository's root; the last line that matches the "
              "file names its owner, not the first one nor the most specific one). The check compares your owner "
              "with that handle: no other name, however plausible, is the owner")
#: Part 1's device rule, as the kit's predicate applies it (``rmsnorm.predicate``'s device condition).
DEVICE_RULE = ("The predicate's `device` condition holds for a CUDA tensor with the interpreter off, or a CPU tensor "
               "with it on: a CUDA tensor while the interpreter is on fails `device` (the interpreter runs the kernels "
               "on the CPU), and `architecture` is judged only on CUDA with the interpreter off")
#: The wording of the rules this check holds answers to beyond forbidden calls: the exercise states each
#: (``tests/course/test_exercise_instructions.py``).
STATED = (CONTRACT_RULE, PROSE_RULE, OWNER_RULE, DEVICE_RULE)


def _describe(name: str, sc) -> str:
    """The scenario, short enough for feedback (a report or a table: what to find in it)."""
    if name == "test_report":
        return f"a report of {sc['report'].count('<testcase')} tests; claims {_brief(sc['claims'], 240)}"
    if name == "results_table":
        return f"a results table of {sc['csv'].count(chr(10)) - 1} rows: {_brief(sc['csv'], 240)}"
    return _brief(sc, 300)


#: The scenario whose justification part 6's feedback shows back: a fixed one, so the same answer shows the same text
#: at every run (the drawn scenarios change at each call; a saved notebook's output must not).
SHOWN_SCENARIO = {"change": {"default_eps": 1e-5},
                  "calls": [{"id": "call1", "dtype": "float64", "eps": None},
                            {"id": "call2", "dtype": "float16", "eps": 1e-6},
                            {"id": "call3", "dtype": "bfloat16", "eps": None}]}


def _shown(fn) -> list[str]:
    """The feedback's lines that show part 6's justification back, unscored: ``fn``'s for :data:`SHOWN_SCENARIO`."""
    try:
        text = _mapping(_run(fn, SHOWN_SCENARIO["change"], SHOWN_SCENARIO["calls"]),
                        ("own_commit", "affected", "pin", "justification"), "migration")["justification"]
    except Fail:
        return []
    if not isinstance(text, str) or not text.strip():
        return []
    return [f"your justification for the default moving to 1e-05 with callers {_brief(SHOWN_SCENARIO['calls'])}, "
            f"{PROSE_LABEL}:", f"  {_brief(text, 1200)}"]


def _grade(name: str, fn, rng) -> list:
    def run():
        scenarios = draw(name, rng)
        wrong = []
        for sc in scenarios:
            yours, want, ok = _grade_one(name, fn, sc)
            if not ok:
                wrong.append((sc, yours, want))
        if wrong:
            lines = [f"{len(wrong)} of {len(scenarios)} scenarios answered differently "
                     "(scenarios drawn by this check):"]
            for sc, yours, want in wrong[:_SHOWN]:
                lines += [f"  scenario: {_describe(name, sc)}", f"    yours:    {_brief(yours)}",
                          f"    expected: {_brief(want)}"]
                if name == "contract_change":
                    lines.append(f"    differs in: {', '.join(_fields_that_differ(yours, want))}")
            if len(wrong) > _SHOWN:
                lines.append(f"  ... and {len(wrong) - _SHOWN} more")
            if name == "maintenance_cost" and any(y.get("owner") != w.get("owner") for _, y, w in wrong):
                lines.append("  the owner differs: the last line of CODEOWNERS that matches the kernel's file names "
                             "its owner, not the first one nor the most specific one")
            raise Fail("\n".join(lines + (_shown(fn) if name == "contract_change" else [])))
        return "\n".join([f"{len(scenarios)} scenarios drawn by the check, all answered as the lesson's rule does",
                          *(_shown(fn) if name == "contract_change" else [])])

    if name not in PARTS:
        raise Fail(f"exercise 13 has no part {name!r}; its parts are {list(PARTS)}")
    return [part("ex13", name, run)]


def check_readiness(name: str, fn, *, show: bool = True, seed: int | None = None):
    """One part of exercise 13: ``fn`` answers the scenarios of part ``name`` (see the notebook for each signature).

    Args:
        seed: draw the scenarios reproducibly (tests); ``None`` draws new ones at every call.
    """
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    return graded("ex13", [name if name in PARTS else PARTS[0]], _grade, name, fn, rng, show=show)
