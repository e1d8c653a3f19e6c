"""Exercise 13: review readiness, six parts, each about a real artefact of the kit rather than a table of phrases.

``check_readiness(part, fn)`` calls the learner's ``fn`` on scenarios drawn at that call
(:mod:`~fastpath_lib.grading.rules.ex13_scenarios`: a call and the kit's ``capture.json``, a pytest JUnit report and the
claims of a PR note, a ``results.csv`` table, review comments on a PR note, lesson 06's replay and build tables, a
change of the default ``eps`` and its callers), and compares each answer with the grader's rule. A part passes when
every scenario is answered right; every answer of a small answer space, and each of part 1's conditions failing
alone, occurs in every draw, so a function that returns one constant, ignores a condition or answers recorded for the
examples the notebook shows fails. The grader's own rules (the scenario module) and the kit's answers (the predicate
and ``capture.json``'s reader, the bytes model, the results classifier) may not be called.

>>> [r.passed for r in check_readiness("review_comments", lambda comments, cases: {}, show=False)]
[False]
"""

from __future__ import annotations

import copy
import math
import random
import re

from fastpath_lib.grading.report.feedback import Fail, graded, part, real, truth
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.rules.assertion import NOT_AFFIRMED, asserted
from fastpath_lib.grading.rules.ex13_scenarios import ACTIONS, SWITCHES, VERDICTS, draw, expected, old_default_eps

__all__ = ["check_readiness", "PARTS", "JUSTIFICATION_RULE", "OWNER_RULE", "DEVICE_RULE", "STATED", "stated_eps"]

#: The parts, in the notebook's order (the registry's ``ex13`` entry lists the same names).
PARTS = ("route_conditions", "test_report", "results_table", "review_comments", "maintenance_cost",
         "contract_change")

_FORBIDDEN = borrowed.kit("grading/rules/ex13_scenarios.py", why="that is the grader's own rule") + borrowed.kit(
    "grading/checks/ex13_review.py", why="that is the grader's own check") + borrowed.kit(
    "bench/timing.py", "bytes_moved", why="the part asks you to apply the bytes model yourself") + borrowed.kit(
    "rmsnorm/cost.py", "bytes_moved", why="the part asks you to apply the bytes model yourself") + borrowed.kit(
    "rmsnorm/predicate.py", why="the part asks you to apply the conditions yourself") + borrowed.kit(
    "rmsnorm/capture.py", why="the part asks you to read capture.json yourself") + borrowed.kit(
    "bench/analysis.py", "classify", "summary_table", "boundary_table", "outcome_counts",
    why="that is the kit's reading of a results table; use outcome and noise_band")
_SHOWN = 4  # mismatches listed in the feedback


def _close(a, b, rel=1e-6) -> bool:
    a = real(a)  # any real number: a numpy or 0-d tensor result counts, a bool does not
    return a is not None and math.isclose(a, float(b), rel_tol=rel, abs_tol=1e-9)


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
            raise Fail(f"switch {out['switch']!r} is not the kit's way off the fast path without a code change "
                       f"(one of {list(SWITCHES)})")
        shown = {k: v if k == "owner" or real(v) is None or real(v).is_integer() else round(real(v), 6)
                 for k, v in ((k, out[k]) for k in want)}
        return shown, {k: v if k == "owner" else round(v, 6) for k, v in want.items()}, ok
    if name == "contract_change":
        out = _mapping(_run(fn, sc["change"], sc["calls"]), ("own_commit", "affected", "pin", "justification"),
                       "migration")
        aff = _as_set(out["affected"], "affected")
        pin = out["pin"] if isinstance(out["pin"], dict) else {}
        pins_ok = set(pin) == set(want["pin"]) and all(_close(pin[k], v, 1e-9) for k, v in want["pin"].items())
        held = [old_default_eps(c["dtype"]) for c in sc["calls"]] + [c["eps"] for c in sc["calls"] if c["eps"]]
        misses = _unstated_facts(out["justification"], sc["change"]["default_eps"], want["pin"], held,
                                 [c["id"] for c in sc["calls"] if c["id"] not in want["pin"]])
        ok = truth(out["own_commit"]) is True and aff == want["affected"] and pins_ok and not misses
        yours = {"justification misses": misses, "own_commit": out["own_commit"], "affected": sorted(aff),
                 "pin": pin}
        return yours, {"justification misses": [], "own_commit": True, "affected": sorted(want["affected"]),
                       "pin": want["pin"]}, ok
    raise Fail(f"exercise 13 has no part {name!r}")


#: What a justification states, each fact checked against the scenario; the check reads these facts, not the wording.
JUSTIFICATION_RULE = ("a justification that states what the change does to these callers: the new default; today's "
                      "default of the callers it changes (each of their old values, the values `pin` holds, and no "
                      "other value as today's default: the callers of a dtype the change does not touch keep theirs); "
                      "and which "
                      "callers change, by naming every affected id or by their count written as a number (`3` or "
                      "`three`). Write each eps as a number (any spelling Python reads as that value, such as `1e-5`, "
                      "`1e-05` or `0.00001`, or that value rounded to the digits you write, such as `1.19e-07`) or as "
                      "a power of two (`2**-23`). Each fact is read where a word binds it: the new default after `to`, "
                      "`becomes` or `new` (or before `after`), each old value after `from`, `today's` or `old` (or "
                      "before `today` or an arrow), the count before `callers` or `call sites`; an eps that is none "
                      "of the scenario's (the new default, the callers' defaults and the eps they pass) is refused. "
                      "Only a sentence that affirms a fact states it: one that negates, denies, asks, supposes or "
                      "hedges it (`does not change`, `if we moved`, `might`, `perhaps`, a `?`) states nothing. "
                      "Every fact written must be true: a value bound as the new default is the new default, one "
                      "bound as today's default is a default of a caller that changes; a caller named is one that "
                      "changes, unless its clause says it keeps its output (`does not change`, `keeps`, `unchanged`, "
                      "`unaffected`, `its own eps`), and a caller that changes is not said to keep it; a count "
                      "before `callers` is the number that change or the number of callers. "
                      "The check reads these facts and not the wording: there is no word count, and a justification "
                      "without them (whatever its length) loses the part")
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
STATED = (JUSTIFICATION_RULE, OWNER_RULE, DEVICE_RULE)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_POWER = re.compile(r"2\s*(?:\*\*|\^)\s*\(?\s*-\s*(\d+)\s*\)?")
#: A whole number standing alone (not part of a decimal, an exponent, an id or a power of two).
_COUNT = re.compile(r"(?<![\w.*^+-])\d+(?![\w.]|\s*(?:\*\*|\^))")
_COUNT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve")


def _names_value(text: str, value: float) -> bool:
    """Whether ``text`` writes ``value``: a number that reads as it, or as it rounded to the significant digits the
    number is written with (``1.19e-07`` for ``2**-23``), or ``2**-N``.

    >>> [_names_value(t, 1e-05) for t in ("eps 1e-5", "eps 1e-05", "eps 0.00001", "eps 1.0e-5", "eps 1e-6")]
    [True, True, True, True, False]
    >>> [_names_value(t, 2.0**-23) for t in ("1.19e-07", "1.1920928955078125e-07", "2 ** -23", "2**(-23)", "1.2e-06")]
    [True, True, True, True, False]
    """
    if any(2.0 ** -int(n) == value for n in _POWER.findall(text)):
        return True
    for written in _NUMBER.findall(text):
        got = float(written)
        digits = len(re.split(r"[eE]", written)[0].lstrip("+-").replace(".", "").lstrip("0")) or 1
        if got == value or (got != 0 and float(f"{value:.{digits - 1}e}") == got):
            return True
    return False


def _names_count(text: str, n: int) -> bool:
    """Whether ``text`` writes the whole number ``n`` on its own, in digits or as a word.

    >>> [_names_count(t, 3) for t in ("3 callers", "three callers", "call3 and 2**-23", "eps 1e-3", "0.3")]
    [True, True, False, False, False]
    """
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    return any(int(d) == n for d in _COUNT.findall(text)) or (n < len(_COUNT_WORDS) and _COUNT_WORDS[n] in words)


#: What says which fact an eps written in a justification is, read in the words before it (the last such word
#: decides): the new default (``to``, ``becomes``, ``new``, ``now``, ``after``, an arrow) or today's (``from``,
#: ``today``, ``old``, ``currently``, ``before``, ``was``, ``instead of``, ``machine epsilon``, and what a caller pins
#: or keeps); ``to`` after a word of pinning (``pin``, ``keep``, ``pass``) gives the value a caller keeps, today's.
_ROLE = re.compile(r"(?P<new>\bto\b|\bbecom\w*|\bnew\b|\bnow\b|\bwill be\b|\bafter\b|\binto\b|->|→|=>)|"
                   r"(?P<old>\bfrom\b|\btoday\w*|\bold\b|\bcurrent\w*|\bprevious\w*|\bexisting\b|\bepsilon\b|"
                   r"\bbefore\b|\bwas\b|\bwere\b|\bused to\b|\binstead of\b|\brather than\b)|"
                   r"(?P<kept>\bpin\w*|\bkeep\w*|\bkept\b)",
                   re.IGNORECASE)
_PINNING = re.compile(r"\b(pin\w*|keep\w*|kept|pass\w*|explicit\w*)\b", re.IGNORECASE)
#: Words after an eps that say which it is: ``today``, ``currently``, ``before``, an arrow (today's) or ``after``,
#: ``going forward``, ``instead`` (the new one); read up to the next word of :data:`_ROLE` that binds what follows it.
_ROLE_AFTER = re.compile(r"(?P<old>\btoday\b|\bcurrently\b|\bat present\b|\bbefore\b|->|→|=>)|"
                         r"(?P<new>\bafter\b|\bfrom now on\b|\bgoing forward\b|\bafterwards\b|\binstead\b(?! of))",
                         re.IGNORECASE)
#: A number of callers: a whole number before ``callers``, ``call sites``, ``calls`` (up to two words between) or
#: ``of the``.
_CALLERS = re.compile(rf"(?<![\w.*^+-])(\d+|{'|'.join(_COUNT_WORDS)})\s+(?:(?:\w+\s+){{0,2}}"
                      r"(?:callers?|call[- ]?sites?|calls?|sites?)\b|of\s+(?:the|them|these)\b)", re.IGNORECASE)
_LISTED = re.compile(r"^\s*(?:,|and|or|/|,\s*and|,\s*or)?\s*$", re.IGNORECASE)
_WINDOW = 60  # characters before a value (or a list of values) read for its role


def _eps_written(text: str) -> list[tuple[int, int, float]]:
    """``(start, end, value)`` of each eps written in ``text``: a power of two or a number with a point or an
    exponent (a whole number is a count, not an eps)."""
    powers = [(m.start(), m.start() + len(m.group(0).rstrip()), 2.0 ** -int(m.group(1)))
              for m in _POWER.finditer(text)]
    numbers = [(m.start(), m.end(), float(m.group(0))) for m in _NUMBER.finditer(text)
               if re.search(r"[.eE]", m.group(0)) and not any(a <= m.start() < b for a, b, _ in powers)]
    return sorted(powers + numbers)


def _bound_before(window: str) -> str:
    """What binds a value: the end of ``window`` (the text before it) from its sentence's last clause, a colon ending
    a clause too, except after a short label with no role word of its own after it (``- old default: 1.19e-07``: the
    label binds the value, as ``label: value`` does)."""
    clause = re.split(r"[.;!?](?:\s|$)", window)[-1]
    parts = re.split(r"(?<=:)(?=\s|$)", clause)
    last = parts[-1]
    if len(parts) > 1 and not _ROLE.search(last) and len(parts[-2].strip(" -*:").split()) <= 4:
        return parts[-2] + last
    return last


def stated_eps(text: str) -> dict[str, list[str]]:
    """Each eps ``text`` writes, by the fact it states: ``"new"`` (the new default), ``"old"`` (today's default),
    ``"kept"`` (what a caller pins or keeps), ``"none"`` (no word binds it) or ``"unaffirmed"`` (its sentence does not
    affirm it: negated, denied, supposed, hedged or asked, :func:`~fastpath_lib.grading.rules.assertion.asserted`). A
    list (``2**-52 or 2**-23``, ``1e-5 and 1e-6``) takes the role of the words around it.

    >>> stated_eps("The default moves from 2**-52 or 2**-23 to 1e-06; callers pin 2**-23 to keep it.")
    {'new': ['1e-06'], 'old': ['2**-52', '2**-23'], 'kept': ['2**-23'], 'none': [], 'unaffirmed': []}
    >>> stated_eps("1.19e-07 today, 1e-05 after the change. eps 1e-5 1e-8. If it moved to 1e-4, ...")
    {'new': ['1e-05'], 'old': ['1.19e-07'], 'kept': [], 'none': ['1e-5', '1e-8'], 'unaffirmed': ['1e-4']}
    >>> stated_eps("- old default: 1.19e-07\\n- new default: 1e-05\\n- callers that change: call1, call3")
    {'new': ['1e-05'], 'old': ['1.19e-07'], 'kept': [], 'none': [], 'unaffirmed': []}
    """
    found = _eps_written(text)
    groups: list[list[tuple[int, int, float]]] = []
    for v in found:
        if groups and _LISTED.match(text[groups[-1][-1][1]:v[0]]):
            groups[-1].append(v)
        else:
            groups.append([v])
    out: dict[str, list[str]] = {"new": [], "old": [], "kept": [], "none": [], "unaffirmed": []}
    prev = 0
    for g in groups:
        start, end = g[0][0], g[-1][1]
        before = _bound_before(text[max(prev, start - _WINDOW):start])
        rest = re.split(r"[.;!?](?:\s|$)", text[end:end + _WINDOW])[0]
        following = [m for m in _ROLE_AFTER.finditer(rest)
                     if not any(c.lastgroup == "new" or c.group(0).lower() == "from"
                                for c in _ROLE.finditer(rest[:m.start()]))]  # up to a word that binds what follows
        cues = list(_ROLE.finditer(before))
        at = start  # where the fact is read as affirmed or not: its binding word ("instead of 2**-52" names the old)
        if following and not rest[:following[0].start()].strip(" ()"):  # right after it: "1.19e-07 today"
            role = following[0].lastgroup
        elif cues:
            role, at = cues[-1].lastgroup, start - len(before) + cues[-1].start()
            if role == "new" and cues[-1].group(0).lower() == "to" and _PINNING.search(before[:cues[-1].start()]):
                role = "kept"
        else:
            role = following[0].lastgroup if following else "none"
        out[role if asserted(text, at) else "unaffirmed"] += [text[a:b] for a, b, _ in g]
        prev = end
    return out


#: Where a justification's clause ends, for what it says of the callers it names: a sentence mark, a comma, ``so``,
#: ``while``, ``but``, ``whereas``, ``namely``.
_CLAUSE_END = re.compile(r"[.;:,!?]\s|[.;:,!?]$|\b(so|while|but|whereas|namely|and then)\b", re.IGNORECASE)
#: What says a caller's output does not change: a negation or a word of keeping ("do not change", "keep their eps",
#: "unaffected", "their own eps").
_NO_CHANGE = re.compile(r"\b(not|never|neither|nor|keeps?|kept|keeping|stays?|unchanged|unaffected|untouched|same|"
                        r"own|explicit\w*)\b|n't\b", re.IGNORECASE)


def _clause_at(text: str, at: int) -> str:
    """The clause of ``text`` around position ``at`` (:data:`_CLAUSE_END` on either side)."""
    starts = [m.end() for m in _CLAUSE_END.finditer(text, 0, at)]
    end = _CLAUSE_END.search(text, at)
    return text[starts[-1] if starts else 0:end.start() if end else len(text)]


def _false_callers(text: str, pin: dict, others, total: int) -> list[str]:
    """What ``text`` says falsely of the callers: an unaffected caller named where its clause does not say it keeps
    its output, an affected caller or their count named where its clause says it keeps it, a count of callers that is
    neither the number that change nor the number of callers."""
    out = []
    for k in [*pin, *others]:
        for m in re.finditer(rf"(?<!\w){re.escape(str(k))}(?!\w)", text):
            kept = bool(_NO_CHANGE.search(_clause_at(text, m.start()).replace(str(k), " ")))
            if asserted(text, m.start()) and kept == (k in pin):
                out.append(f"{k} is said to {'keep its output' if kept else 'change'}, but its output "
                           f"{'changes' if kept else 'does not change'} (an affected caller changes; one that passes "
                           "its own eps, or whose default does not move, keeps its output)")
                break
    for m in _CALLERS.finditer(text):
        n = m.group(1).lower()
        value = int(n) if n.isdigit() else _COUNT_WORDS.index(n)
        if not asserted(text, m.start()):
            continue
        if value not in (len(pin), total):
            out.append(f"{m.group(0).strip()!r}: {len(pin)} callers change, of {total}")
        elif value == len(pin) != total and re.search(r"\b(keeps?|kept|stays?|unchanged|without a pin)\b",
                                                      _clause_at(text, m.start()), re.IGNORECASE):
            out.append(f"{m.group(0).strip()!r} are said to keep their output, but they change")
    return out


def _unstated_facts(text, new_eps: float, pin: dict, held=(), others=None) -> list[str]:
    """The facts of :data:`JUSTIFICATION_RULE` that ``text`` does not state for this scenario (``pin``: the grader's
    affected callers, each with today's default), each eps it writes that the scenario does not hold (``held``:
    every value of its callers, their defaults and the eps they pass), each value it gives a role it does not have
    (a new default that is not the new one, an old default no affected caller has) and, where the unaffected callers
    are given (``others``), what it says falsely of the callers (:func:`_false_callers`)."""
    if not isinstance(text, str):
        return [f"a justification is a str, got {type(text).__name__}"]
    said = stated_eps(text)
    new = " ".join(said["new"])
    old = " ".join(said["old"] + said["kept"])
    misses = [] if _names_value(new, new_eps) else [f"the new default {new_eps!r} (written after `to`, `becomes` or "
                                                    "`new`, or before `after`)"]
    misses += [f"today's default {v!r} of the callers it changes (written after `from`, `today's` or `old`, or "
               "before `today`)" for v in sorted(set(pin.values())) if not _names_value(old, v)]
    ids = {k: list(re.finditer(rf"(?<!\w){re.escape(str(k))}(?!\w)", text)) for k in pin}
    named = all(any(asserted(text, m.start()) for m in found) for found in ids.values())
    counts = list(_CALLERS.finditer(text))
    counted = [m.group(1) for m in counts if asserted(text, m.start())]
    hedged = said["unaffirmed"] + [m.group(0) for m in [*counts, *(m for f in ids.values() for m in f)]
                                   if not asserted(text, m.start())]
    if not named and not any(_names_count(n, len(pin)) for n in counted):
        misses.append(f"which callers change (every affected id, or their count, {len(pin)}, before `callers`)")
    values = [*pin.values(), new_eps, *held]
    misses += [f"{w} is no eps of this scenario" for role, ws in said.items() if role != "unaffirmed" for w in ws
               if not any(_names_value(w, v) for v in values)]
    misses += [f"{w} is stated as the new default, but the new default is {new_eps!r}" for w in said["new"]
               if not _names_value(w, new_eps)]
    if others is not None:
        misses += _false_callers(text, pin, others, len(pin) + len(others))
    misses += [f"{w} is stated as today's default, but no caller the change affects has it (callers of the dtypes "
               "the change does not touch keep their default: name only the old defaults of the callers it changes)"
               for w in said["old"] if any(_names_value(w, v) for v in values)
               and not any(_names_value(w, v) for v in pin.values())]
    if misses and hedged:
        misses.append(f"{', '.join(dict.fromkeys(hedged))}: {NOT_AFFIRMED}")
    return misses


def _describe(name: str, sc) -> str:
    """The scenario, short enough for feedback (a report or a table: what to find in it)."""
    if name == "test_report":
        return f"a report of {sc['report'].count('<testcase')} tests; claims {_brief(sc['claims'], 240)}"
    if name == "results_table":
        return f"a results table of {sc['csv'].count(chr(10)) - 1} rows: {_brief(sc['csv'], 240)}"
    return _brief(sc, 300)


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
            if len(wrong) > _SHOWN:
                lines.append(f"  ... and {len(wrong) - _SHOWN} more")
            if name == "maintenance_cost" and any(y.get("owner") != w.get("owner") for _, y, w in wrong):
                lines.append("  the owner differs: the last line of CODEOWNERS that matches the kernel's file names "
                             "its owner, not the first one nor the most specific one")
            raise Fail("\n".join(lines))
        return f"{len(scenarios)} scenarios drawn by the check, all answered as the lesson's rule does"

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
