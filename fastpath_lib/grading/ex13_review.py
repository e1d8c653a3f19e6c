"""Exercise 13: review readiness, the lessons' remaining items in short graded parts.

``check_readiness(part, fn)`` calls the learner's ``fn`` on scenarios drawn at that call
(:mod:`~fastpath_lib.grading.ex13_scenarios`: plain dicts and lists, new numbers and ids every time, shuffled), and
compares each answer with the grader's rule. A part passes when every scenario is answered right, so a function that
returns one constant, or answers recorded for the examples the notebook shows, fails. The grader's own rules (the
scenario module) and the kit's answer for the mechanism part (``rmsnorm.cost.bytes_moved``, also reached as
``bench.timing.bytes_moved``) may not be called.

>>> [r.passed for r in check_readiness("readability", lambda pair: "a", show=False)]
[False]
"""

from __future__ import annotations

import math
import random
import re

from fastpath_lib.grading import borrowed
from fastpath_lib.grading.ex13_scenarios import ACTIONS, SWITCHES, TEST_KINDS, draw, expected
from fastpath_lib.grading.feedback import Fail, emit, part

__all__ = ["check_readiness", "PARTS"]

#: The parts, in the notebook's order (the registry's ``ex13`` entry lists the same names).
PARTS = ("route_conditions", "modes_preserved", "test_kinds", "ci_or_schedule", "why_not_baseline",
         "workload_replay", "compile_cost", "fallback_and_owner", "boundary_plot", "mechanism", "contract_change",
         "readability", "review_response")

_FORBIDDEN = borrowed.kit("grading/ex13_scenarios.py", why="that is the grader's own rule") + borrowed.kit(
    "grading/ex13_review.py", why="that is the grader's own check") + borrowed.kit(
    "rmsnorm/cost.py", "bytes_moved", why="that is the kit's answer to the mechanism part") + borrowed.kit(
    "rmsnorm/predicate.py", why="the part asks you to apply the conditions yourself")
_PLACEHOLDER_OWNER = re.compile(r"^@?(owner|someone|somebody|team|the[-_ ]?team|tbd|todo|maintainers?|nobody|me|"
                                r"name|handle|user|x+)$", re.IGNORECASE)
_OWNER = re.compile(r"^@[A-Za-z0-9][\w.-]{1,38}$|^[\w.+-]+@[\w-]+(\.[\w-]+)+$")
_SHOWN = 4  # mismatches listed in the feedback


def _close(a, b, rel=1e-3) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False


def _report(wrong: list[tuple[str, str, str]], n: int) -> None:
    if wrong:
        lines = [f"{len(wrong)} of {n} scenarios answered differently (scenarios drawn by this check):"]
        for what, yours, want in wrong[:_SHOWN]:
            lines += [f"  scenario: {what}", f"    yours:    {yours}", f"    expected: {want}"]
        if len(wrong) > _SHOWN:
            lines.append(f"  ... and {len(wrong) - _SHOWN} more")
        raise Fail("\n".join(lines))


def _brief(obj, limit=160) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _as_set(out, what: str) -> frozenset:
    if isinstance(out, str) or not hasattr(out, "__iter__"):
        raise Fail(f"{what} must return a list or set of names, got {type(out).__name__}: {_brief(out)}")
    return frozenset(str(x) for x in out)


def _mapping(out, keys: tuple[str, ...], what: str) -> dict:
    if not isinstance(out, dict):
        raise Fail(f"{what} must return a dict with keys {list(keys)}, got {type(out).__name__}: {_brief(out)}")
    missing = [k for k in keys if k not in out]
    if missing:
        raise Fail(f"{what}'s dict has no {missing} (it needs {list(keys)})")
    return out


def _grade_one(name: str, fn, scenario):
    """``(yours, want, ok)`` for one scenario of part ``name``."""
    want = expected(name, scenario)
    if name == "route_conditions":
        yours = _as_set(borrowed.run(fn, (dict(scenario),), _FORBIDDEN, allow_none=True) or (), "failed_conditions")
        return sorted(yours), sorted(want), yours == want
    if name == "modes_preserved":
        yours = borrowed.run(fn, (dict(scenario),), _FORBIDDEN)
        if not isinstance(yours, bool):
            raise Fail(f"preserved must return True or False, got {type(yours).__name__}: {_brief(yours)}")
        return yours, want, yours == want
    if name in ("test_kinds", "ci_or_schedule"):
        out = borrowed.run(fn, (dict(scenario),), _FORBIDDEN)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise Fail(f"catching_test must return (kind, when), got {_brief(out)}")
        kind, when = str(out[0]), str(out[1])
        if name == "test_kinds":
            if kind not in TEST_KINDS:
                raise Fail(f"unknown test kind {kind!r}: use one of {list(TEST_KINDS)}")
            return kind, " or ".join(sorted(want[0])), kind in want[0]
        return when, " or ".join(sorted(want[1])), when in want[1]
    if name == "why_not_baseline":
        out = _mapping(borrowed.run(fn, (scenario,), _FORBIDDEN), ("beats_compiled", "verdict"), "why_not")
        yours = {"beats_compiled": sorted(_as_set(out["beats_compiled"], "beats_compiled")), "verdict": out["verdict"]}
        want_s = {"beats_compiled": sorted(want["beats_compiled"]), "verdict": want["verdict"]}
        return yours, want_s, yours == want_s
    if name == "workload_replay":
        out = _mapping(borrowed.run(fn, ([dict(r) for r in scenario],), _FORBIDDEN), tuple(want), "replay")
        ok = all(_close(out[k], want[k], 1e-6) for k in want) and out["unmeasured_calls"] == want["unmeasured_calls"]
        return {k: out[k] for k in want}, {k: round(v, 4) for k, v in want.items()}, ok
    if name == "compile_cost":
        out = _mapping(borrowed.run(fn, (scenario,), _FORBIDDEN), tuple(want), "cold_start")
        ok = out["binaries"] == want["binaries"] and out["cubin_bytes"] == want["cubin_bytes"] \
            and _close(out["compile_s"], want["compile_s"], 1e-6)
        return {k: out[k] for k in want}, {k: round(v, 4) for k, v in want.items()}, ok
    if name == "fallback_and_owner":
        out = _mapping(borrowed.run(fn, (dict(scenario),), _FORBIDDEN), ("action", "switch", "owner"), "respond")
        return out["action"], want, out["action"] == want and (want != "switch" or out["switch"] in SWITCHES)
    if name == "boundary_plot":
        out = _mapping(borrowed.run(fn, ([dict(r) for r in scenario["results"]], scenario["threshold"]),
                                    _FORBIDDEN), ("triton", "fallback"), "plot_points")
        try:
            yours = {k: {(int(p[0]), round(float(p[1]), 3)) for p in out[k]} for k in ("triton", "fallback")}
        except (TypeError, ValueError, IndexError) as exc:
            raise Fail(f"plot_points must give (rows, speedup) pairs per route: {exc}") from None
        return ({k: sorted(v) for k, v in yours.items()}, {k: sorted(v) for k, v in want.items()},
                yours == want)
    if name == "mechanism":
        out = _mapping(borrowed.run(fn, (dict(scenario),), _FORBIDDEN), tuple(want), "mechanism")
        ok = out["bytes"] == want["bytes"] and all(_close(out[k], want[k]) for k in ("gbps", "copy_fraction"))
        return {k: out[k] for k in want}, {k: round(v, 4) for k, v in want.items()}, ok
    if name == "contract_change":
        out = _mapping(borrowed.run(fn, (dict(scenario["change"]), [dict(c) for c in scenario["calls"]]),
                                    _FORBIDDEN), ("own_commit", "affected", "pin", "justification"), "migration")
        aff = _as_set(out["affected"], "affected")
        pin = out["pin"] if isinstance(out["pin"], dict) else {}
        pins_ok = set(pin) == set(want["pin"]) and all(_close(pin[k], v, 1e-9) for k, v in want["pin"].items())
        ok = out["own_commit"] is True and aff == want["affected"] and pins_ok and _justified(
            out["justification"], scenario["change"]["default_eps"])
        yours = {"own_commit": out["own_commit"], "affected": sorted(aff), "pin": pin}
        return yours, {"own_commit": True, "affected": sorted(want["affected"]), "pin": want["pin"],
                       "justification": "a few sentences naming the new default"}, ok
    if name == "readability":
        yours = borrowed.run(fn, (dict(scenario),), _FORBIDDEN)
        return yours, want, yours == want
    if name == "review_response":
        yours = borrowed.run(fn, (dict(scenario["comment"]), [dict(r) for r in scenario["results"]]), _FORBIDDEN)
        if yours not in ACTIONS:
            raise Fail(f"respond must return one of {list(ACTIONS)}, got {_brief(yours)}")
        return yours, want, yours == want
    raise Fail(f"exercise 13 has no part {name!r}")


def _justified(text, new_eps: float) -> bool:
    """A justification of a sentence or two that names the new default (as written by repr, str or :g)."""
    if not isinstance(text, str) or len(re.findall(r"[A-Za-z]+", text)) < 10:
        return False
    forms = {repr(new_eps), str(new_eps), f"{new_eps:g}", f"{new_eps:.0e}", f"2**-{round(-math.log2(new_eps))}",
             f"2 ** -{round(-math.log2(new_eps))}"}
    return any(f in text for f in forms)


def _owner_problem(owners: set) -> str | None:
    if len(owners) != 1:
        return f"one named owner answers every incident; yours: {sorted(map(str, owners))}"
    (owner,) = owners
    if not isinstance(owner, str) or not _OWNER.match(owner.strip()) or _PLACEHOLDER_OWNER.match(owner.strip()):
        return (f"owner {owner!r} is not a named person: give an @handle or an e-mail address (not a team or a "
                f"placeholder)")
    return None


def check_readiness(name: str, fn, *, show: bool = True, seed: int | None = None):
    """One part of exercise 13: ``fn`` answers the scenarios of part ``name`` (see the notebook for each signature).

    Args:
        seed: draw the scenarios reproducibly (tests); ``None`` draws new ones at every call.
    """
    rng = random.Random(seed) if seed is not None else random.SystemRandom()

    def run():
        if name not in PARTS:
            raise Fail(f"exercise 13 has no part {name!r}; its parts are {list(PARTS)}")
        scenarios = draw(name, rng)
        wrong, owners = [], set()
        for sc in scenarios:
            yours, want, ok = _grade_one(name, fn, sc)
            if not ok:
                wrong.append((_brief(sc), _brief(yours), _brief(want)))
        if name == "fallback_and_owner":
            owners = {str(borrowed.run(fn, (dict(sc),), _FORBIDDEN).get("owner")) for sc in scenarios}
            if problem := _owner_problem(owners):
                wrong.append(("every incident", problem, "the same @handle or e-mail each time"))
        _report(wrong, len(scenarios))
        return f"{len(scenarios)} scenarios drawn by the check, all answered as the lesson's rule does"

    return emit([part("ex13", name if name in PARTS else PARTS[0], run)], show)
