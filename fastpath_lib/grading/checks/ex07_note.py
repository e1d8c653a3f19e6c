"""Exercise 07: the PR note, written from a results table and its environment record, graded on what a program can
decide.

``write_pr_note(results_df, env) -> str`` is called on the synthetic GPU-shaped table of exercise 06, on a table
drawn afresh at every call (so a note written for the fixed table alone does not pass), and on CPU-interpreter-shaped
data. Points are earned only from structured elements, each in a form the exercise states (:data:`STATED`): the six
section headings, the performance table (:mod:`~fastpath_lib.grading.rules.ex07_tables`) and the labelled lines
(:mod:`~fastpath_lib.grading.rules.ex07_labels`: ``Environment:``, ``Scope:``, ``Outcomes:``, a case line per loss
and neutral case, the six method lines), every value in them held to the table and the environment record. Prose is
for a person to read and earns nothing; it loses points in two cases a program decides reliably: a sentence that
denies every loss while the table has losses, and a speed-up claimed from CPU data.

Every part is judged only on a note with substance on each table (:func:`substance_gaps`: case lines or table rows
giving at least two of its cases a figure of their own). Six parts: the sections; concision (at most
:data:`WORD_LIMIT` words outside ``<details>`` blocks, the kit's rule for its own notes); the environment and the
scope; consistency with the data (table, ``Outcomes:``, case lines, no denial of the losses, synthetic data called
synthetic); the measurement method of ``env["harness"]`` (the drawn table comes with a drawn harness, so a method
copied from the fixed one fails); and no speed-up claimed from non-GPU data.
"""

from __future__ import annotations

import collections
import random
import re

from fastpath_lib.grading.checks.ex06_classify import drawn_results
from fastpath_lib.grading.given import expected_classes
from fastpath_lib.grading.materials import (
    harness,
    interpreter_environment,
    interpreter_results,
    synthetic_environment,
    synthetic_results,
)
from fastpath_lib.grading.registry import Result
from fastpath_lib.grading.report.feedback import Fail, graded, part
from fastpath_lib.grading.rules import borrowed
from fastpath_lib.grading.rules import ex07_claims as claims
from fastpath_lib.grading.rules import ex07_labels as labels
from fastpath_lib.grading.rules import ex07_tables as tables
from fastpath_lib.grading.rules.ex07_wording import (
    CASE_RULE,
    COVERED,
    CPU_RULE,
    DTYPE_RULE,
    ENVIRONMENT_RULE,
    FALLBACK_RULE,
    FIGURE_RULE,
    FIGURES_ARE,
    LIMIT_RULE,
    METHOD_RULE,
    NAMED_WITH_FIGURES,
    NO_LOSS_RULE,
    OUTCOMES_RULE,
    OUTLINE_RULE,
    PROSE_NOTE,
    SECTION_RULE,
    STATED,
    SUBSTANCE_RULE,
    TABLE_RULE,
)
from fastpath_lib.grading.rules.assertion import asserted
from fastpath_lib.grading.rules.ex07_claims import claims_speedup, words_outside_details
from fastpath_lib.grading.vocabulary import LOSS, NOT_GPU, WIN
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["check_pr_note", "SECTIONS", "WORD_LIMIT", "words_outside_details", "substance_gaps",
           "claims_speedup", "STATED"]

#: The most words a note may show outside ``<details>`` blocks (the kit's own rule for its PR notes, restated here and
#: tied to it by ``tests/bench/test_pr_concise.py``: the grader imports nothing of the kit's note).
WORD_LIMIT = 600

#: section -> pattern its heading must match
SECTIONS = {
    "summary": r"summary",
    "eligibility/fallback": r"eligib|fallback",
    "semantic evidence": r"semantic|correctness",
    "mechanism": r"mechanism",
    "performance": r"performance",
    "limitations": r"limitation",
}
_COVERED = COVERED
_PLACEHOLDER = re.compile(r"\b(todo|tbd|fill me in|lorem ipsum|xxx)\b|^\W*$", re.IGNORECASE)
_FORBIDDEN = borrowed.kit("bench", why="that is the kit's own PR note") + borrowed.kit(
    "grading/checks/ex07_note.py", why="that is the grader's own answer") + borrowed.kit(
    "grading/rules/ex07_claims.py", why="that is the grader's own reading of a note") + borrowed.kit(
    "grading/rules/rendered.py", why="that is the grader's own reading of a note") + borrowed.kit(
    "grading/rules/ex07_tables.py", why="that is the grader's own reading of a note") + borrowed.kit(
    "grading/rules/ex07_labels.py", why="that is the grader's own reading of a note")
_GIVEN = borrowed.given("grading/given.py", "expected_classes", why="given") + borrowed.given(
    "grading/materials.py", "synthetic_results", "synthetic_environment", why="given")


def _rows(df) -> dict:
    return {str(r["case_id"]): r for _, r in df.iterrows()}


def _lines(note: str, df, *, checked: bool = False) -> list[labels.Line]:
    return labels.lines(note, [str(c) for c in df["case_id"]], checked=checked)


def _with_figures(note: str, df) -> set[str]:
    """The cases the note's case lines a reader sees give a figure of their own."""
    rows = _rows(df)
    return {x.label for x in _lines(note, df) if x.label in rows and any(
        claims.is_figure(v, d, claims.figures(rows[x.label])) for v, d, _ in claims.figures_in(x.value))}


def substance_gaps(note: str, df) -> list[str]:
    """What a note lacks to be judged at all on table ``df``: case lines that give at least
    :data:`NAMED_WITH_FIGURES` of the table's cases (all of a shorter table) a figure of their own. A skeleton of
    headings, a project's template, a note of filler or keyword lines and a copied table, or a note written for
    another table has none; a real note, however short, gives some of its cases what they measured."""
    need, named = min(NAMED_WITH_FIGURES, len(df)), _with_figures(note, df)
    if len(named) >= need:
        return []
    return [f"it gives {len(named)} of this table's {len(df)} cases a figure of their own (at least {need}: "
            f"{SUBSTANCE_RULE})"]


def _drawn_environment() -> dict:
    env = synthetic_environment()
    rng = random.SystemRandom()
    env["device_name"] = f"synthetic GPU no. {rng.randint(2, 99)} (drawn by the check)"
    env["harness"] = harness(warmup_ms=rng.choice((10, 25, 75, 100)), samples=rng.randint(20, 400),
                             raw=f"raw_{rng.randint(1000, 9999)}.csv")
    return env


def _datasets():
    return (("GPU-shaped data", synthetic_results(), synthetic_environment()),
            ("a GPU-shaped table drawn now", drawn_results(), _drawn_environment()),
            ("CPU-shaped data", interpreter_results(), interpreter_environment()))


def _notes(write_pr_note, data) -> dict[str, str]:
    """The learner's note on each data set."""
    notes = {}
    for which, df, env in data:
        note = borrowed.run(write_pr_note, (df, env), _FORBIDDEN, given=_GIVEN)
        if not isinstance(note, str) or not note.strip():
            raise Fail(f"write_pr_note must return the note as a non-empty str, got {type(note).__name__}")
        notes[which] = note
    return notes


def _substance(data, notes: dict[str, str]) -> None:
    """No part is judged on a note without substance (:func:`substance_gaps`)."""
    problems = []
    for which, df, _env in data:
        gaps = substance_gaps(notes[which], df)
        if gaps:
            problems.append(f"{which}: " + "; ".join(gaps))
    if problems:
        raise Fail("not judged: the note has no substance (write it from the table it is given: name its cases, give "
                   "their numbers, say what they show)\n" + "\n".join(problems))


def _judge_concise(data, notes: dict[str, str]) -> str:
    counts = {which: words_outside_details(notes[which]) for which, df, env in data}
    said = "; ".join(f"{which}: {n}" for which, n in counts.items())
    if max(counts.values()) > WORD_LIMIT:
        raise Fail(f"too long: words outside <details> blocks ({said}), at most {WORD_LIMIT}. Keep the summary, "
                   "the scope, the counts and the claim in sight; fold the full tables in "
                   "<details><summary>...</summary> ... </details>")
    # the drawn table's count changes with each draw: a passing verdict reads the same on every run
    return f"every note keeps at most {WORD_LIMIT} words outside <details> blocks"


def _said(found: dict[str, str]) -> dict[str, set[str]]:
    return {h: {" ".join(s.lower().split()) for s in claims.statements(b)
                if len(re.findall(r"[A-Za-z0-9]+", s)) >= 5 and not _PLACEHOLDER.search(s.strip())}
            for h, b in found.items()}


def _own_sentences(note: str) -> dict[str, list[str]]:
    """Heading -> the sentences of its section (its subsections included) that say something (5 words or more, no
    placeholder) and are said in no other section (a subsection's sentence is said once, in the subsection)."""
    said = _said(claims.sections(note))
    seen = collections.Counter(s for sentences in _said(claims.sections(note, nested=False)).values()
                               for s in sentences)
    return {h: [s for s in sentences if seen[s] == 1] for h, sentences in said.items()}


def _judge_sections(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, _env in data:
        found_raw = claims.sections(notes[which])
        found = {h: claims.visible_text(b) for h, b in found_raw.items()}  # what renders
        own = _own_sentences(notes[which])
        for name, pat in SECTIONS.items():
            heads = [h for h in found if re.search(pat, h)]
            if not heads:
                problems.append(f"{which}: no '## ...' heading for {name}")
            elif not any(own[h] or claims.all_table_rows(found_raw[h]) or _lines(found_raw[h], df) for h in heads):
                problems.append(f"{which}: the {name} section says nothing of its own ({SECTION_RULE})")
            elif name == "performance" and not any(all(str(c) in found[h] for c in df["case_id"]) for h in heads):
                absent = [str(c) for c in df["case_id"] if not any(str(c) in found[h] for h in heads)]
                problems.append(f"{which}: the performance section does not list this table's cases (not under it: "
                                f"{', '.join(absent)}; {OUTLINE_RULE})")
    if problems:
        raise Fail("missing or empty sections\n" + "\n".join(problems))


def _scope_problems(scope: str, df) -> list[str]:
    """How a scope statement strays from the fast path's region as the predicate and the table's routes give it."""
    triton = [str(c) for c, route in zip(df["case_id"], df["route"]) if route == "triton"]
    out = []
    limits = claims.column_limits(scope)
    if not limits:
        out.append(f"the scope statement gives no column limit ({LIMIT_RULE})")
    widths = {str(c): (claims.case_shape(str(c)) or (0, 0))[1] for c in df["case_id"]}
    for n in sorted(set(limits) - {rms.MAX_COLS}):
        wider = [c for c in triton if widths[c] > n]
        falls = [c for c in widths if c not in triton and rms.MAX_COLS < widths[c] <= n]
        seen = (f", and {wider[0]} ({widths[wider[0]]} columns) takes the Triton route in this table" if wider else
                f", and {falls[0]} ({widths[falls[0]]} columns) falls back in this table" if falls else "")
        out.append(f"the scope statement gives a column limit of {n}; the fast path's is {rms.MAX_COLS} (`MAX_COLS`)"
                   + seen)
    named = claims.dtypes_named(scope)
    for d in _COVERED:
        if d not in named:
            routed = [c for c in triton if claims.case_dtype(c) == d]
            out.append(f"the scope statement does not name {d} ({DTYPE_RULE})"
                       + (f"; {routed[0]} takes the Triton route in this table" if routed else ""))
    if not re.search(r"fallback|fall\w* back|f\.rms_norm", scope, re.IGNORECASE):  # where the other calls go
        out.append(f"the scope statement does not name what happens outside it ({FALLBACK_RULE})")
    return out


def _judge_environment_and_scope(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, env in data:
        raw = notes[which]
        missing, wrong = labels.environment_problems(_lines(raw, df), _lines(raw, df, checked=True), env)
        problems += [f"{which}: {p}" for p in missing + wrong]
        scope = claims.scope_text(raw, claims.sections(raw))
        if not scope.strip():
            problems.append(f"{which}: no scope statement (a `Scope:` line or a `## Scope` section of a sentence "
                            "or two: which calls take the fast path, and what happens to the rest)")
        else:
            problems += [f"{which}: {p}" for p in _scope_problems(scope, df)]
    if problems:
        raise Fail("\n".join(problems) + f"\n(the form: {ENVIRONMENT_RULE})")


#: A sentence that says nothing is slower: a loss word (any of :data:`~.ex07_claims.OUTCOME_WORDS`' loss words: "got
#: worse", "regresses") under a word that denies every one, in one clause ("never slower", "nothing is slower", "no
#: shape got worse", "without losses"), or a win word said of every case ("always faster", "beats F.rms_norm on every
#: shape", "improves on it everywhere"); "no slower" and "not slower" compare one thing.
_UNIVERSAL = (r"\b(always|everywhere|uniformly|across the board|without exception|"
              r"(every|each|all)\s+(?:[a-z]+\s+){0,2}?(shapes?|cases?|sizes?|inputs?|workloads?|configurations?|rows?))\b")
_LOSS, _WIN = claims.OUTCOME_WORDS[LOSS], claims.OUTCOME_WORDS[WIN]
#: "no slower" compares one thing, and so does "no faster and no slower".
_COMPARED = r"(?!\s+(?:faster\s+(?:and|or|nor)\s+no\s+)?slower\b)"
_NO_LOSS = re.compile(rf"\b(never|nothing|nowhere|none|without|zero|no{_COMPARED})\b[^.;,:]*?(?:{_LOSS})|"
                      rf"(?:{_WIN})[^;:]*?{_UNIVERSAL}|{_UNIVERSAL}[^;:]*?(?:{_WIN})", re.IGNORECASE)
#: Words that make such a sentence a qualified one (it names its exceptions).
_EXCEPT = re.compile(r"\b(except|but|apart from|other than|besides|outside|beyond|elsewhere|otherwise)\b", re.I)


def _denies_losses(note: str, ids) -> list[str]:
    """The sentences of ``note`` (:func:`~fastpath_lib.grading.rules.ex07_claims.statements`) that say nothing is
    slower (never slower, without regressions) while naming no case of ``ids`` (a sentence that names one speaks of
    it) and no exception; a sentence that hopes or asks it (``was expected never to be slower``) says none
    (:func:`~fastpath_lib.grading.rules.assertion.asserted`)."""
    named = claims.id_pattern(ids)
    return [s for s in claims.statements(note, checked=True)
            if any(asserted(s, m.start()) for m in _NO_LOSS.finditer(s))
            and not _EXCEPT.search(s) and not named.search(s)]


def _row_problems(which: str, note: str, df, env) -> list[str]:
    """Every table row that names a case, wherever it stands (:func:`~fastpath_lib.grading.rules.ex07_tables.
    row_problems`): its figures, and on GPU data its route and outcome; every case id written in disguise."""
    rows, h = _rows(df), env["harness"]
    beside = [float(h["warmup_ms"]), *map(float, re.findall(r"\d+", h["spread"]))]
    on_gpu = "cuda" == env.get("device")
    out = tables.row_problems(
        which, note, rows, lambda cid: claims.figures(
            rows[cid], [*beside, *(claims.case_shape(cid) or ()), h["samples"], rms.MAX_COLS]),
        outcomes=expected_classes(df) if on_gpu else None,
        routes=dict(zip(df["case_id"], df["route"])) if on_gpu else None)
    return out + tables.disguised_ids(which, note, rows)


def _label_problems(which: str, note: str, df) -> list[str]:
    """The ``Outcomes:`` line and the case lines against the data (:mod:`~fastpath_lib.grading.rules.ex07_labels`)."""
    seen, every, exp = _lines(note, df), _lines(note, df, checked=True), expected_classes(df)
    return [f"{which}: {p}" for p in labels.outcome_problems(seen, every, exp, SECTIONS["summary"])
            + labels.case_problems(seen, every, _rows(df), exp)]


def _judge_consistent(data, notes: dict[str, str]) -> str:
    problems = []
    for which, df, env in data:
        note = notes[which]
        problems += _row_problems(which, note, df, env)
        if env.get("device") != "cuda":  # no outcome on non-GPU data (no_claims_from_cpu_data)
            problems += [f"{which}: {p}" for p in labels.case_problems([], _lines(note, df, checked=True),
                                                                        _rows(df), None)]
            continue
        problems += _table_problems(which, note, df) + _label_problems(which, note, df)
        losses = [c for c, k in expected_classes(df).items() if k == LOSS]
        for sentence in (_denies_losses(note, list(df["case_id"])) if losses else ()):
            problems.append(f"{which}: the note says {sentence!r}, but the data has {len(losses)} "
                            f"{LOSS if len(losses) == 1 else LOSS + 'es'} ({', '.join(losses)}): say where it is "
                            f"slower, as the table does ({NO_LOSS_RULE})")
        env_line = " ".join(x.value for x in _lines(note, df) if x.label == "environment")
        if env.get("synthetic") and "synthetic" not in env_line.lower():
            problems.append(f"{which}: the data is labelled synthetic; the `Environment:` line must say so")
    n = len(labels.prose(notes[data[0][0]], data[0][1]["case_id"]))
    prose = f"{PROSE_NOTE}: {n} such paragraphs and list items in the note on {data[0][0]}"
    if problems:
        rules = [f"{FIGURE_RULE}; a case's figures are {FIGURES_ARE}" if "figures" in p else
                 OUTCOMES_RULE if "Outcomes" in p else CASE_RULE if "case line" in p else
                 TABLE_RULE if "table" in p else "" for p in problems]
        raise Fail(f"{len(problems)} inconsistencies with the data\n" + "\n".join(problems)
                   + "".join(f"\n(the rule: {r})" for r in dict.fromkeys(rules) if r) + f"\n({prose})")
    return ("the table, the Outcomes line and the case lines agree with the data on every table, and no sentence "
            f"denies the losses; {prose}")


def _table_problems(which: str, note: str, df) -> list[str]:
    """The performance table's rows against the data: one per case, its route and its class (a case's row is its row
    under the Performance heading, else its first row anywhere; every other row is checked as a claim of its own)."""
    return tables.performance_problems(which, note, expected_classes(df), dict(zip(df["case_id"], df["route"])),
                                       SECTIONS["performance"])


def _judge_method(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, env in data:
        note = notes[which]
        gaps = labels.method_problems(_lines(note, df), _lines(note, df, checked=True), env["harness"])
        problems += [f"{which}: {g}" for g in gaps]
    if problems:
        raise Fail(f"how the numbers were measured is missing or wrong (give {METHOD_RULE})\n" + "\n".join(problems))


def _judge_no_cpu_claims(data, notes: dict[str, str]) -> None:
    which, df, env = data[2]
    note = notes[which]
    problems = []
    env_line = " ".join(x.value for x in _lines(note, df) if x.label == "environment")
    if " ".join(NOT_GPU.lower().split()) not in " ".join(env_line.lower().split()):
        problems.append(f"on CPU data the `Environment:` line must say {NOT_GPU!r}")
    rows = list(dict.fromkeys(" | ".join(cells) for row in claims.all_table_rows(note, checked=True) for cells in row))
    for sentence in [c for s in claims.statements(note, checked=True) for c in s.split(";")] + rows:
        if claims_speedup(sentence):
            problems.append(f"claims a speed-up from non-GPU data: {sentence.strip()!r}")
    wins = [c for c, (cells, _) in claims.table_rows(note).items()
            if any(claims.outcome_of(x) in (WIN, LOSS) for x in cells[1:])]  # in any words: "win (interpreter)"
    if wins:
        problems.append(f"the table marks {wins} as wins or losses from non-GPU data")
    for x in _lines(note, df, checked=True):
        if x.label in _rows(df) and labels.case_class(x.value)[0] in (WIN, LOSS):
            problems.append(f"'{x.text}' marks {x.label} a {labels.case_class(x.value)[0]} from non-GPU data")
        if x.label == "outcomes":
            counts = labels.outcome_counts(x.value)[0]
            if counts.get(WIN) or counts.get(LOSS):
                problems.append(f"'{x.text}' counts wins or losses from non-GPU data")
    if problems:
        raise Fail("\n".join(problems) + f"\n(the rule: {CPU_RULE})")


#: part -> how it is judged, in the registry's order
_JUDGED = (("sections", _judge_sections), ("concise", _judge_concise),
           ("environment_and_scope", _judge_environment_and_scope), ("consistent_with_data", _judge_consistent),
           ("measurement_method", _judge_method), ("no_claims_from_cpu_data", _judge_no_cpu_claims))


def _grade(data, write_pr_note) -> list[Result]:
    """Each part judged on its own, once the notes have substance (else every part fails with what is missing)."""
    notes = _notes(write_pr_note, data)
    _substance(data, notes)
    return [part("ex07", name, judge, data, notes) for name, judge in _JUDGED]


def check_pr_note(write_pr_note, *, show: bool = True):
    """``write_pr_note(results_df, env) -> str`` on GPU-shaped (fixed and drawn) and CPU-shaped data."""
    return graded("ex07", [name for name, _ in _JUDGED], _grade, _datasets(), write_pr_note, show=show)
