"""Exercise 07: the PR note, written from a results table and its environment record, graded by what it asserts.

``write_pr_note(results_df, env) -> str`` is called on the synthetic GPU-shaped table of exercise 06, on a table
drawn afresh at every call (so a note written for the fixed table alone does not pass), and on CPU-interpreter-shaped
data. The note is read as :mod:`~fastpath_lib.grading.rules.ex07_claims` reads it (statements, the cases they name,
the figures and outcomes they give them, counts, column limits, method facts), and each assertion is held against
the table and the environment record the note was written from. No count of words, case ids, numbers or keywords
earns anything: a keyword line or a filler sentence asserts nothing, so it meets none of the rules below, and every
rule is stated in the exercise (:data:`STATED`).

Every part is judged only on a note with substance on each table (:func:`substance_gaps`: sentences that name at
least two of its cases, each with a figure of its own). Six parts: the sections, each with a sentence of its own, the
performance section listing every case; concision (at most :data:`WORD_LIMIT` words outside ``<details>`` blocks, the
kit's rule for its own notes); the environment (device, ``torch`` and ``triton`` versions after their names) and a
scope statement whose column limit is the predicate's (a Triton-routed case wider than the stated limit contradicts
it), which names every dtype the fast path covers and says where the other calls go; consistency with the data (the
performance table's routes and classes, every figure given for a case, every outcome claimed for a case and every
count of an outcome, a summary that says where the fast path wins, is neutral and loses, each loss and neutral case
named with a figure of its own, no "never slower" beside the table's losses, synthetic data called synthetic); the
measurement method of ``env["harness"]``, each fact stated as a fact (the drawn table comes with a drawn harness, so a
method copied from the fixed one fails); and no speed-up claimed from non-GPU data, where an honest "no speed-up is
claimed" is accepted.
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
from fastpath_lib.grading.rules import ex07_tables as tables
from fastpath_lib.grading.rules.ex07_wording import (
    COUNT_RULE,
    COVERED,
    DTYPE_RULE,
    FALLBACK_RULE,
    FIGURE_RULE,
    FIGURES_ARE,
    LIMIT_RULE,
    METHOD_RULE,
    NAMED_RULE,
    NAMED_WITH_FIGURES,
    NO_LOSS_RULE,
    OUTCOME_RULE,
    OUTLINE_RULE,
    SECTION_RULE,
    STATED,
    SUBSTANCE_RULE,
    SUMMARY_RULE,
    TABLE_RULE,
    VERSION_RULE,
)
from fastpath_lib.grading.rules.assertion import NOT_AFFIRMED, asserted
from fastpath_lib.grading.rules.ex07_claims import claims_speedup, words_outside_details
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, NOT_GPU, TIMED_OUTCOMES, WIN
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
    "grading/rules/ex07_tables.py", why="that is the grader's own reading of a note")
_GIVEN = borrowed.given("grading/given.py", "expected_classes", why="given") + borrowed.given(
    "grading/materials.py", "synthetic_results", "synthetic_environment", why="given")


def _rows(df) -> dict:
    return {str(r["case_id"]): r for _, r in df.iterrows()}


def _beside(env) -> list[float]:
    """Numbers of the method a sentence may give beside a case (the warm-up, the spread's quantiles)."""
    h = env["harness"]
    return [float(h["warmup_ms"]), *map(float, re.findall(r"\d+", h["spread"]))]


def _own_figure(m: claims.Mention, row) -> bool:
    """Whether mention ``m`` gives its case a figure of the case's own (a method's number beside it is none)."""
    return any(claims.is_figure(v, d, claims.figures(row)) for v, d, _ in claims.figures_in(m.segment))


def _with_figures(note: str, df) -> set[str]:
    """The cases the note's sentences name with a figure of their own."""
    rows = _rows(df)
    return {m.case for m in claims.mentions(note, rows) if _own_figure(m, rows[m.case])}


def substance_gaps(note: str, df) -> list[str]:
    """What a note lacks to be judged at all on table ``df``: sentences that name at least :data:`NAMED_WITH_FIGURES`
    of the table's cases (all of a shorter table), each with a figure of its own. A skeleton of headings, a project's
    template, a note of filler or keyword lines, or a note written for another table has none; a real note, however
    short, says what some of its cases measured."""
    need, named = min(NAMED_WITH_FIGURES, len(df)), _with_figures(note, df)
    if len(named) >= need:
        return []
    return [f"it names {len(named)} of this table's {len(df)} cases with a figure of their own (at least {need}: "
            f"{SUBSTANCE_RULE})"]


def _drawn_environment() -> dict:
    env = synthetic_environment()
    rng = random.SystemRandom()
    env["device_name"] = f"synthetic GPU no. {rng.randint(2, 99)} (drawn by the check)"
    env["harness"] = harness(warmup_ms=rng.choice((10, 25, 75, 100)), samples=rng.randint(20, 400),
                             raw=f"raw_{rng.randint(1000, 9999)}.csv")
    return env


#: fact of the method record -> what the note must state of it (formatted with the record).
_METHOD = {"timer": "the timer ({timer}) in a sentence about timing",
           "warmup": "the warm-up ({warmup_ms} ms) as a warm-up of so many ms",
           "sync": "how the device is synchronized before a timing is read",
           "statistic": "the statistic with its sample count (the {statistic} of {samples} samples)",
           "spread": "the spread ({spread}) as a range of quantiles",
           "raw": "where the raw samples are ({raw_samples}), with what the file holds"}


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
        found = {h: claims.visible_text(b) for h, b in claims.sections(notes[which]).items()}  # what renders
        own = _own_sentences(notes[which])
        for name, pat in SECTIONS.items():
            heads = [h for h in found if re.search(pat, h)]
            if not heads:
                problems.append(f"{which}: no '## ...' heading for {name}")
            elif not any(own[h] for h in heads):
                problems.append(f"{which}: the {name} section says nothing of its own ({SECTION_RULE})")
            elif name == "performance" and not any(all(str(c) in found[h] for c in df["case_id"]) for h in heads):
                absent = [str(c) for c in df["case_id"] if not any(str(c) in found[h] for h in heads)]
                problems.append(f"{which}: the performance section does not list this table's cases (not under it: "
                                f"{', '.join(absent)}; {OUTLINE_RULE})")
    if problems:
        raise Fail("missing or empty sections\n" + "\n".join(problems))


def _version_given(lib: str, version: str, note: str) -> bool:
    """Whether ``note`` gives ``version`` after the name ``lib`` (``torch 2.5.1``, ``PyTorch 2.5.1``,
    ``triton==3.1.0``, ``triton version 3.1.0``)."""
    return bool(re.search(rf"(?<![\w.])(?:py)?{lib}\W{{0,3}}(?:version\W{{0,2}}|v)?{re.escape(version)}(?!\w|\.\d)",
                          note, re.IGNORECASE))


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
        note = claims.visible_text(raw)  # what renders: nothing in a comment counts
        device = "device_name" if env.get("device_name") else "device"
        if " ".join(str(env[device]).split()) not in " ".join(note.split()):  # over a line break too
            problems.append(f"{which}: the note does not give the environment's {device} ({env[device]!r})")
        for lib in ("torch", "triton"):
            if not _version_given(lib, str(env[lib]), note):
                problems.append(f"{which}: the note does not give the environment's {lib} version ({env[lib]!r}): "
                                f"{VERSION_RULE}")
        scope = claims.scope_text(raw, claims.sections(raw))
        if not scope.strip():
            problems.append(f"{which}: no scope statement (a 'Scope' section or a 'Scope:' paragraph of a sentence "
                            "or two: which calls take the fast path, and what happens to the rest)")
        else:
            problems += [f"{which}: {p}" for p in _scope_problems(scope, df)]
    if problems:
        raise Fail("\n".join(problems))


#: A sentence that says nothing is slower: a loss word (any of :data:`~.ex07_claims.OUTCOME_WORDS`' loss words: "got
#: worse", "regresses") under a word that denies every one, in one clause ("never slower", "nothing is slower", "no
#: shape got worse", "without losses"), or a win word said of every case ("always faster", "beats F.rms_norm on every
#: shape", "improves on it everywhere"); "no slower" and "not slower" compare one thing.
_UNIVERSAL = (r"\b(always|everywhere|uniformly|across the board|without exception|"
              r"(every|each|all)\s+(?:[a-z]+\s+){0,2}?(shapes?|cases?|sizes?|inputs?|workloads?|configurations?|rows?))\b")
_LOSS, _WIN = claims.OUTCOME_WORDS[LOSS], claims.OUTCOME_WORDS[WIN]
_NO_LOSS = re.compile(rf"\b(never|nothing|nowhere|none|without|zero|no(?!\s+slower\b))\b[^.;,:]*?(?:{_LOSS})|"
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


def _figure_text(row) -> str:
    b, c = row["baseline_median_us"], row["candidate_median_us"]
    return (f"medians {b} and {c} us, spreads {row['baseline_spread_us']} and {row['candidate_spread_us']} us, "
            f"ratio {c / b:.3g}" if b and c else f"medians {b} and {c} us")


def _figure_problems(which: str, note: str, df, env) -> list[str]:
    """Every number the note gives for a case, in a sentence or in a table row naming it, that is not that case's; on
    GPU data, every table row's route and outcome too (:func:`~fastpath_lib.grading.rules.ex07_tables.row_problems`:
    every row is a claim, wherever it stands)."""
    rows, beside, out = _rows(df), _beside(env), []
    for m in claims.mentions(note, rows, checked=True):  # any text a reader may see can lose points
        known = claims.figures(rows[m.case], beside)
        out += [f"{which}, {m.case}: the note gives it {raw!r}, none of its figures ({_figure_text(rows[m.case])})"
                for v, d, raw in claims.figures_in(m.segment) if not claims.is_figure(v, d, known)]
    h = env["harness"]
    on_gpu = "cuda" == env.get("device")
    out += tables.row_problems(
        which, note, rows, lambda cid: claims.figures(
            rows[cid], [*beside, *(claims.case_shape(cid) or ()), h["samples"], rms.MAX_COLS]),
        outcomes=expected_classes(df) if on_gpu else None,
        routes=dict(zip(df["case_id"], df["route"])) if on_gpu else None)
    out += tables.disguised_ids(which, note, rows)
    return list(dict.fromkeys(out))


def _readings(text: str, rows) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each sentence of ``text`` with what was read from it: ``(outcome, "count N" or "claimed for CASE")``."""
    ids, out = claims.id_pattern(rows), []
    for sentence in claims.statements(text):
        taken = [(c.outcome, f"count {c.n} (from {c.words!r})") for c in claims.counts_in(ids.sub("CASE", sentence))]
        taken += [(m.outcome, f"claimed for {m.case}") for m in claims.mentions(sentence, rows) if m.outcome]
        out.append((sentence, taken))
    return out


def _claim_problems(which: str, note: str, df, env) -> list[str]:
    """Outcome claims and counts the data contradicts; outcomes the summary leaves out; losses and neutral cases not
    named with their outcome and a figure of their own."""
    exp, rows, out = expected_classes(df), _rows(df), []
    found = claims.mentions(note, rows)  # the note's own plain statements: what earns
    for m in claims.mentions(note, rows, checked=True):  # all its text: what loses
        if m.outcome and m.outcome != exp[m.case]:
            out.append(f"{which}, {m.case}: the note calls it {m.outcome} ({m.sentence.strip()!r}), the data says "
                       f"{exp[m.case]}")
        elif m.outcome is None and set(m.asserted) - {exp[m.case], FALLBACK}:
            out.append(f"{which}, {m.case}: the note calls it {' and '.join(m.asserted)} ({m.sentence.strip()!r}), "
                       f"the data says {exp[m.case]}")
        elif m.unasserted.get(exp[m.case]) == "denied" and m.outcome != exp[m.case]:
            out.append(f"{which}, {m.case}: the note denies that it is {exp[m.case]} ({m.sentence.strip()!r}), as the "
                       "data says it is")
    tally, ids = collections.Counter(exp.values()), claims.id_pattern(rows)
    wrong = {}
    for sentence in claims.statements(note, checked=True):
        for c in claims.counts_in(ids.sub("CASE", sentence)):
            if c.n != tally[c.outcome]:
                wrong.setdefault((c.outcome, c.n), sentence)
    out += [f"{which}: the note counts {n} {k} cases, the data has {tally[k]} (read from {sentence!r}; {COUNT_RULE})"
            for (k, n), sentence in wrong.items()]
    summary = "\n\n".join(b for h, b in claims.sections(note).items() if re.search(SECTIONS["summary"], h))
    read = _readings(summary, rows)
    said = {k for _, taken in read for k, _ in taken}
    missing = [k for k in TIMED_OUTCOMES if tally[k] and k not in said]
    if missing:
        shown = "\n".join(f"  {s!r}: " + ("; ".join(f"{k} {what}" for k, what in taken) if taken else
                                          "no outcome count or claim") for s, taken in read) or "  (no sentences)"
        out.append(f"{which}: the summary does not say where the fast path is {' or '.join(missing)} ({SUMMARY_RULE}"
                   f"; {COUNT_RULE}). What was read from each sentence of the summary:\n{shown}")
    for cid, k in exp.items():
        if k in (LOSS, NEUTRAL) and not any(m.case == cid and m.outcome == k and _own_figure(m, rows[cid])
                                            for m in found):
            hedged = next((m.sentence for m in found if m.case == cid and k in m.unasserted), None)
            out.append(f"{which}, {cid}: {k} in the data, and not named so with a figure of its own ({NAMED_RULE})"
                       + (f"; {hedged.strip()!r} does not affirm it: {NOT_AFFIRMED}" if hedged else ""))
    return out


def _table_problems(which: str, note: str, df) -> list[str]:
    """The performance table's rows against the data: one per case, its route and its class (a case's row is its row
    under the Performance heading, else its first row anywhere; every other row is checked as a claim of its own)."""
    return tables.performance_problems(which, note, expected_classes(df), dict(zip(df["case_id"], df["route"])),
                                       SECTIONS["performance"])


def _judge_consistent(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, env in data:
        note = notes[which]
        problems += _figure_problems(which, note, df, env)
        if env.get("device") != "cuda":  # no outcome on non-GPU data (no_claims_from_cpu_data)
            continue
        problems += _table_problems(which, note, df) + _claim_problems(which, note, df, env)
        losses = [c for c, k in expected_classes(df).items() if k == LOSS]
        for sentence in (_denies_losses(note, list(df["case_id"])) if losses else ()):
            problems.append(f"{which}: the note says {sentence!r}, but the data has {len(losses)} "
                            f"{LOSS if len(losses) == 1 else LOSS + 'es'} ({', '.join(losses)}): say where it is "
                            f"slower, as the table does ({NO_LOSS_RULE})")
        if env.get("synthetic") and "synthetic" not in claims.visible_text(note).lower():
            problems.append(f"{which}: the data is labelled synthetic; the note must say so")
    if problems:
        rules = [f"{FIGURE_RULE}; a case's figures are {FIGURES_ARE}" if "none of its figures" in p else
                 OUTCOME_RULE if "the note calls it" in p else TABLE_RULE if "the table says" in p else ""
                 for p in problems]
        raise Fail(f"{len(problems)} inconsistencies with the data\n" + "\n".join(problems)
                   + "".join(f"\n(how the note is read: {r})" for r in dict.fromkeys(rules) if r))


def _judge_method(data, notes: dict[str, str]) -> None:
    problems = []
    for which, _df, env in data:
        h = env["harness"]
        gaps = [_METHOD[k].format(**h) for k, ok in claims.method_facts(notes[which], h).items() if not ok]
        if gaps:
            problems.append(f"{which}: the note does not give " + "; ".join(gaps))
    if problems:
        raise Fail(f"how the numbers were measured is missing (give {METHOD_RULE})\n" + "\n".join(problems))


def _judge_no_cpu_claims(data, notes: dict[str, str]) -> None:
    which, df, env = data[2]
    note = notes[which]
    problems = []
    if " ".join(NOT_GPU.lower().split()) not in " ".join(claims.visible_text(note).lower().split()):  # wrapped too
        problems.append(f"on CPU data the note must say {NOT_GPU!r}")
    rows = list(dict.fromkeys(" | ".join(cells) for row in claims.all_table_rows(note, checked=True) for cells in row))
    for sentence in [c for s in claims.statements(note, checked=True) for c in s.split(";")] + rows:
        if claims_speedup(sentence):
            problems.append(f"claims a speed-up from non-GPU data: {sentence.strip()!r}")
    wins = [c for c, (cells, _) in claims.table_rows(note).items()
            if any(claims.outcome_of(x) in (WIN, LOSS) for x in cells[1:])]  # in any words: "win (interpreter)"
    if wins:
        problems.append(f"the table marks {wins} as wins or losses from non-GPU data")
    said = [m for m in claims.mentions(note, _rows(df), checked=True) if m.outcome in (WIN, LOSS)]
    problems += [f"calls {m.case} a {m.outcome} from non-GPU data: {m.sentence.strip()!r}" for m in said]
    if problems:
        raise Fail("\n".join(problems))


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
