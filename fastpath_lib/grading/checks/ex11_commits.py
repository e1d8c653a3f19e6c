"""Exercise 11: commit hygiene. Sort a change's hunks into an ordered list of reviewable commits.

``plan_commits(hunks) -> [{"kind", "message", "hunks"}, ...]``: the hunks of one piece of work (a new predicate
condition with what prepares and documents it, a simplification, a call site routed through the new op, their
tests) come as dicts ``{"id", "file", "description", "diff"}``; the learner returns the commits in order. Each
commit's ``kind`` is ``"refactor"`` (no behaviour change), ``"test"`` (tests only), ``"behaviour"`` or ``"docs"``.
The check draws the hunks afresh at every call (besides the notebook's fixed draw): their ids, their order and their
texts (the names of the helpers, the function moved and the condition, the model's class and file, the numbers and
the descriptions' wording; :func:`~fastpath_lib.grading.materials.drawn_hunks`), so a list of ids or descriptions
written down once does not pass: a plan reads what each hunk's file and diff do. It grades the rule lesson 07 teaches,
not one answer:

* ``one_change_per_commit``: a commit holds at most one behaviour change; a behaviour change lands with the tests
  of its new behaviour, in its commit (tests that pin today's behaviour may come earlier, never later); docs come
  with or after the change they describe; each commit's kind says what it holds;
* ``every_commit_green``: the suite passes after every commit: no hunk before one it uses, hunks that only work
  together (a rename and the imports it breaks, the halves of a move, a generated table and what generates it)
  in one commit, no test of a new behaviour committed before that behaviour exists;
* ``refactors_apart``: refactor commits change no behaviour (routing a call site through the new op *is* a
  behaviour change), and every hunk that changes no behaviour is in a refactor commit.

A plan earns points only when its history is reviewable at all: ``one_change_per_commit`` and ``every_commit_green``
both hold (lumping every change into one commit keeps every commit green, and splitting it so that a commit is red
keeps one change per commit; neither is the lesson's rule). Until then the parts that hold say so and earn nothing.
Feedback names the rule that is broken and how often, never which hunk: a per-hunk verdict would let a search over
plans stand in for reading the diffs.
"""

from __future__ import annotations

import dataclasses

from fastpath_lib.grading.materials import HUNKS, KINDS, drawn_hunks
from fastpath_lib.grading.registry import Result, points_of
from fastpath_lib.grading.report.feedback import Fail, graded
from fastpath_lib.grading.rules import borrowed

__all__ = ["check_commit_plan", "Rule", "RULES", "STATED"]

_PARTS = ("one_change_per_commit", "every_commit_green", "refactors_apart")
#: Parts a plan must pass before any part earns points.
_GATES = ("one_change_per_commit", "every_commit_green")
_GRADER = borrowed.kit("grading", why="that is the grader's own answer")
#: How many words a commit's message has at least, and the rule in the exercise's words.
MESSAGE_WORDS = 2
MESSAGE_RULE = f"a sentence of at least {MESSAGE_WORDS} words that says what the commit does"
#: The wording of the rules this check holds a plan to beyond :data:`RULES` (whose ``stated`` its own test finds):
#: the exercise states each (``tests/course/test_exercise_instructions.py``).
STATED = (MESSAGE_RULE,)


@dataclasses.dataclass(frozen=True)
class _Hunk:
    key: str
    nature: str  # refactor / behaviour / test / pin / docs (hidden from the learner)
    uses: tuple[str, ...] = ()  # keys that must be committed no later than this one
    together: tuple[str, ...] = ()  # keys that must share this hunk's commit (apart, a commit is red)
    of: str = ""  # the behaviour hunk a test checks, or a docs hunk describes
    # test: checks the new behaviour (red before it lands); pin: checks today's behaviour (green before and after)


#: The answer key: each hunk's nature and dependencies, in the order of :data:`~fastpath_lib.grading.materials.HUNKS`
#: (its texts).
_HUNKS = (
    _Hunk("rename", "refactor"),
    _Hunk("rename_test", "refactor", together=("rename",)),
    _Hunk("move_out", "refactor", together=("move_in",)),
    _Hunk("move_in", "refactor", together=("move_out",)),
    _Hunk("condition", "behaviour", uses=("move_out", "move_in"), together=("readme",)),
    _Hunk("condition_test", "test", of="condition"),
    _Hunk("simplify", "behaviour", uses=("rename",)),
    _Hunk("route", "behaviour"),
    _Hunk("route_test", "test", of="route"),
    _Hunk("pin_test", "pin", of="route"),
    _Hunk("readme", "docs", of="condition", together=("condition",)),
    _Hunk("changelog", "docs", of="condition"),
)
assert len(_HUNKS) == len(HUNKS), "one entry of the answer key per hunk of materials.HUNKS"
_BY_KEY = {h.key: h for h in _HUNKS}


def _draw(seed):
    return [dict(h, _key=_HUNKS[n].key) for n, h in drawn_hunks(seed)]


def _plan(plan_commits, drawn) -> list[tuple[str, list[str]]]:
    """``[(kind, [hunk keys])]`` of the learner's plan; :class:`Fail` when it is not a plan of these hunks."""
    given = [{k: v for k, v in h.items() if k != "_key"} for h in drawn]
    commits = borrowed.run(plan_commits, (given,), _GRADER)
    key_of = {h["id"]: h["_key"] for h in drawn}
    if not isinstance(commits, (list, tuple)) or not commits:
        raise Fail(f"plan_commits must return a list of commits, got {type(commits).__name__}")
    out, seen = [], []
    for n, c in enumerate(commits, 1):
        if not isinstance(c, dict) or not {"kind", "message", "hunks"} <= set(c):
            raise Fail(f"commit {n}: a commit is a dict with 'kind', 'message' and 'hunks', got {c!r:.80}")
        if c["kind"] not in KINDS:
            raise Fail(f"commit {n}: kind {c['kind']!r}; one of {', '.join(KINDS)}")
        if not isinstance(c["message"], str) or len(c["message"].split()) < MESSAGE_WORDS:
            raise Fail(f"commit {n}: a commit's message is {MESSAGE_RULE}")
        if not isinstance(c["hunks"], (list, tuple)) or not c["hunks"]:
            raise Fail(f"commit {n}: no hunks (an empty commit)")
        unknown = [h for h in c["hunks"] if h not in key_of]
        if unknown:
            raise Fail(f"commit {n}: {unknown[0]!r} is not the id of a hunk of this change (ids are drawn afresh "
                       f"at every call: build the plan from the hunks you are given)")
        seen += c["hunks"]
        out.append((c["kind"], [key_of[h] for h in c["hunks"]]))
    twice = sorted({h for h in seen if seen.count(h) > 1})
    missing = [h for h in drawn if h["id"] not in seen]
    if twice:
        raise Fail(f"{len(twice)} hunks are in more than one commit (each hunk goes in exactly one)")
    if missing:
        raise Fail(f"{len(missing)} hunks are in no commit, e.g. {missing[0]['description']!r}")
    return out


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule the check holds a plan to.

    Args:
        part: the graded part a breach fails.
        broken: what the feedback says when a plan breaks it (``{kind}``: the commit's kind).
        stated: the exercise's own words for it, in the bullet of its part
            (``tests/course/test_exercise_instructions.py`` finds them there).
    """

    part: str
    broken: str
    stated: str


#: Every rule of :func:`_violations`, by key: the check reports a breach only through this table.
RULES = {
    "restructure_apart": Rule("refactors_apart", "a hunk that changes no behaviour is outside a refactor commit",
                              'a hunk that only restructures code goes in a `"refactor"` commit'),
    "refactor_only": Rule("refactors_apart",
                          "a commit labelled refactor changes behaviour (or adds tests or docs of a change)",
                          'a `"refactor"` commit holds nothing else: no behaviour change, no new test, no docs'),
    "one_change": Rule("one_change_per_commit", "a commit holds more than one behaviour change",
                       "each commit holds **one** behaviour change"),
    "kind": Rule("one_change_per_commit", "a {kind} commit holds a hunk that is not {kind}",
                 'a `"test"` commit holds only tests, a `"docs"` commit only docs, and a `"behaviour"` commit '
                 'its one change with its tests and docs'),
    "tests_late": Rule("one_change_per_commit",
                       "a behaviour change lands without its tests (they come in a later commit)",
                       "tests go before or with the change they check, never after"),
    "docs_early": Rule("one_change_per_commit", "docs describe a change that a later commit makes",
                       "docs go with or after the change they describe, never before"),
    "test_early": Rule("every_commit_green",
                       "a test of a new behaviour is committed before that behaviour (it fails there)",
                       "a test of a new behaviour goes with it, not before (it fails there)"),
    "uses": Rule("every_commit_green", "a hunk is committed before a hunk it uses",
                 "no hunk comes before a hunk it uses"),
    "together": Rule("every_commit_green", "hunks that only work together are split (a commit in between fails)",
                     "hunks that only work together go in one commit"),
}
assert {r.part for r in RULES.values()} == set(_PARTS), "every part is graded by a rule of RULES"


def _violations(plan) -> dict[str, list[str]]:
    """part -> the rules the plan breaks (one line per rule, with a count)."""
    at = {k: i for i, (_, keys) in enumerate(plan) for k in keys}
    kind_of = {k: kind for kind, keys in plan for k in keys}
    counts: dict[str, dict[str, int]] = {p: {} for p in _PARTS}

    def bad(key, **fields):
        rule = RULES[key]
        text = rule.broken.format(**fields)
        counts[rule.part][text] = counts[rule.part].get(text, 0) + 1

    allowed = {"refactor": {"refactor"}, "test": {"test", "pin"}, "docs": {"docs"},
               "behaviour": {"behaviour", "test", "pin", "docs"}}
    for _kind, keys in plan:  # one behaviour change per commit: a hunk belongs to the change it makes, tests or
        changes = {_BY_KEY[k].of or k for k in keys if _BY_KEY[k].nature != "refactor"}  # documents
        if len(changes) > 1:
            bad("one_change")
    for h in _HUNKS:
        kind, i = kind_of[h.key], at[h.key]
        if h.nature == "refactor" and kind != "refactor":
            bad("restructure_apart")
        elif h.nature != "refactor" and kind == "refactor":
            bad("refactor_only")
        elif h.nature not in allowed[kind]:
            bad("kind", kind=kind)
        if h.nature in ("test", "pin") and at[h.of] < i:
            bad("tests_late")
        if h.nature == "test" and at[h.of] > i:
            bad("test_early")
        if h.nature == "docs" and at[h.of] > i:
            bad("docs_early")
        if any(at[u] > i for u in h.uses):
            bad("uses")
        if any(at[t] != i for t in h.together):
            bad("together")
    return {p: [f"{rule} ({n}x)" for rule, n in c.items()] for p, c in counts.items()}


def _grade(draws, plan_commits) -> list[Result]:
    found: dict[str, list[str]] = {p: [] for p in _PARTS}
    for name, drawn in draws:
        for p, rules in _violations(_plan(plan_commits, drawn)).items():
            found[p] += [f"{name}: {r}" for r in rules if f"{name}: {r}" not in found[p]]
    gates = [g for g in _GATES if found[g]]
    results = []
    for p in _PARTS:
        ok = not found[p] and not gates
        if found[p]:
            text = "\n".join(found[p])
        elif gates:
            text = (f"this rule holds, but a plan earns points once {' and '.join(_GATES)} hold "
                    f"(now broken: {', '.join(gates)})")
        else:
            text = "passed on every draw"
        results.append(Result("ex11", p, points_of("ex11", p), ok, text))
    return results


def check_commit_plan(plan_commits, *, show: bool = True):
    """``plan_commits(hunks) -> [{"kind", "message", "hunks"}, ...]`` on the notebook's draw and two fresh ones."""
    draws = [("the notebook's hunks", _draw(0)), ("hunks drawn now", _draw(None)), ("hunks drawn now", _draw(None))]
    return graded("ex11", _PARTS, _grade, draws, plan_commits, show=show)
