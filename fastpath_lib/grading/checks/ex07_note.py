"""Exercise 07: the PR note, written from a results table and its environment record.

``write_pr_note(results_df, env) -> str`` is called on the synthetic GPU-shaped table of exercise 06, on a table
drawn afresh at every call (so a note written for the fixed table alone does not pass), and on CPU-interpreter-shaped
data. Every part is judged only on a note with substance, on each table (:func:`substance_gaps`: it names the
table's cases, gives its timings and says in sentences what they show), so a skeleton of headings, a copy of a
project's PR template or a note written for another table scores nothing. Six parts: the sections, each with content
(the performance section lists the cases of the table it was given); concision (at most :data:`WORD_LIMIT` words
outside ``<details>`` blocks, the kit's rule for its own notes; the feedback names the count); the environment
metadata
(device, torch and triton versions) and a scope statement (the region the fast path covers); a performance table
whose rows agree with the data, route and class, in a note that never says nothing is slower beside the
table's own losses (:func:`_denies_losses`); the measurement method from ``env["harness"]`` (timer, warm-up,
synchronization, the median of how many samples, the q80 - q20 spread, where the raw samples are; the drawn table
comes with a drawn harness, so a method copied from the fixed one fails); and no speed-up claimed from non-GPU data,
where an honest "no speed-up is claimed" is accepted.
"""

from __future__ import annotations

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
from fastpath_lib.grading.vocabulary import LOSS, NOT_GPU, OUTCOMES, TIMED_OUTCOMES, WIN
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["check_pr_note", "SECTIONS", "WORD_LIMIT", "words_outside_details", "substance_gaps",
           "claims_speedup"]

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
_PLACEHOLDER = re.compile(r"\b(todo|tbd|fill me in|lorem ipsum|xxx)\b|^\W*$", re.IGNORECASE)
#: A speed-up claim: a multiplier ("1.4x", "2 ×"; a shape such as "4096 x 4096" is not one), or its words.
_SPEEDUP = re.compile(r"(?<![x×]\s)(?<![x×])\b\d+(\.\d+)?\s*(x|×)(?!\w|\s*\d)|\bfaster\b|\bquicker\b|"
                      r"\bspeed-?ups?\b|\bspeeds? up\b|\baccelerat\w*", re.IGNORECASE)
#: Words that make a sentence about a speed-up something other than a claim: a negation, or a condition (whether a
#: GPU run shows one is a question, not a claim).
_NEGATION = re.compile(r"\b(no|not|never|without|none|nothing|unmeasured|cannot|whether|if|unless|until)\b|n't\b",
                       re.IGNORECASE)
_FORBIDDEN = borrowed.kit("bench", why="that is the kit's own PR note") + borrowed.kit(
    "grading/checks/ex07_note.py", why="that is the grader's own answer")
_GIVEN = borrowed.given("grading/given.py", "expected_classes", why="given") + borrowed.given(
    "grading/materials.py", "synthetic_results", "synthetic_environment", why="given")


def _sections(note: str) -> dict[str, str]:
    """Heading (lower case) -> the text under it, up to the next heading."""
    out, head, body = {}, None, []
    for line in note.splitlines():
        m = re.match(r"^#{1,6}\s+(.+)$", line)
        if m:
            if head is not None:
                out[head] = "\n".join(body)
            head, body = m.group(1).strip().lower(), []
        elif head is not None:
            body.append(line)
    if head is not None:
        out[head] = "\n".join(body)
    return out


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9]+", text))


_TAG = re.compile(r"<(/?)(details|summary)\b[^>]*>", re.IGNORECASE)


def words_outside_details(markdown: str) -> int:
    """Words a reader sees with every ``<details>`` block folded (its ``<summary>`` counts, its body does not; a block
    never closed folds nothing); a word is a whitespace-separated token with a letter or a digit in it."""
    visible, depth, pos, opened, in_summary = [], 0, 0, 0, False
    for m in _TAG.finditer(markdown):
        closing, tag = m.group(1) == "/", m.group(2).lower()
        if depth == 0 or (depth == 1 and in_summary):
            visible.append(markdown[pos:m.start()])
        if tag == "details":
            if not closing:
                depth += 1
                opened = m.start() if depth == 1 else opened
            elif depth:
                depth -= 1
        elif depth == 1:
            in_summary = not closing
        pos = m.end()
    visible.append(markdown[pos:] if depth == 0 else markdown[opened:])
    return sum(1 for tok in " ".join(visible).split() if re.search(r"[A-Za-z0-9]", tok))


_NUMBER = re.compile(r"(?<![\w.])(\d+)(?:\.(\d+))?(?![\w.]\d)")


def _timings_given(note: str, df) -> int:
    """How many of the table's median times the note states (to the digits it prints, at least 3 significant)."""
    found = []
    for m in _NUMBER.finditer(note):
        digits = (m.group(1) + (m.group(2) or "")).lstrip("0")
        if len(digits) >= 3:
            found.append((float(m.group(0)), len(m.group(2) or "")))
    values = {float(v) for col in ("baseline_median_us", "candidate_median_us") for v in df[col] if v == v}
    return sum(any(abs(x - v) <= 0.5 * 10 ** -d + 1e-9 for x, d in found) for v in values)


def _prose_words(note: str) -> int:
    """Words in sentences: outside headings, tables and HTML tags."""
    lines = [ln for ln in note.splitlines() if not re.match(r"\s*(#|\|)", ln)]
    return _words(re.sub(r"<[^>]*>", " ", "\n".join(lines)))


def substance_gaps(note: str, df) -> list[str]:
    """What a note lacks to be judged at all on table ``df``: it names at least 3 of the table's cases (all of a
    shorter table), states at least 2 of its median times, and has at least 40 words of prose. A skeleton of
    headings, a project's template, or a note written for another table has none of these; a real note, however
    short, has all three."""
    ids = [str(c) for c in df["case_id"]]
    named, need = sum(c in note for c in ids), min(3, len(ids))
    gaps = []
    if named < need:
        gaps.append(f"it names {named} of this table's {len(ids)} cases (at least {need})")
    timings = _timings_given(note, df)
    if timings < 2:
        gaps.append(f"it states {timings} of the table's median times (at least 2)")
    prose = _prose_words(note)
    if prose < 40:
        gaps.append(f"it has {prose} words of prose (at least 40: say in sentences what the data shows)")
    return gaps


def _table_rows(note: str) -> dict[str, tuple[list[str], list[str]]]:
    """Markdown table rows keyed by their first cell (backticks and emphasis stripped): ``(cells, header)``."""
    out, header = {}, None
    for line in note.splitlines() + [""]:
        if not line.strip().startswith("|"):
            header = None
            continue
        cells = [c.strip().strip("`*").strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
        elif not all(set(c) <= set("-: ") for c in cells):
            out.setdefault(cells[0], (cells, header))
    return out


def _route_cell(cells: list[str], header: list[str]) -> str | None:
    """The row's route: the cell under a "route" header, else any cell naming one."""
    if "route" in header and header.index("route") < len(cells):
        return cells[header.index("route")].lower()
    return next((c.lower() for c in cells if c.lower() in ("triton", "fallback")), None)


def _drawn_environment() -> dict:
    env = synthetic_environment()
    rng = random.SystemRandom()
    env["device_name"] = f"synthetic GPU no. {rng.randint(2, 99)} (drawn by the check)"
    env["harness"] = harness(warmup_ms=rng.choice((10, 25, 75, 100)), samples=rng.randint(20, 400),
                             raw=f"raw_{rng.randint(1000, 9999)}.csv")
    return env


def _method_gaps(note: str, h: dict) -> list[str]:
    """What the note leaves out of how the numbers were measured (the environment's ``harness``)."""
    sentences = [s for s in re.split(r"(?<=[.!?;])\s+|\n", note) if s.strip()]

    def said(*patterns) -> bool:
        return any(all(re.search(p, s, re.IGNORECASE) for p in patterns) for s in sentences)

    need = {f"the warm-up ({h['warmup_ms']} ms)": said(r"warm", rf"\b{h['warmup_ms']}\s*ms\b"),
            f"the timer ({h['timer']})": h["timer"] in note,
            "how the device is synchronized before a timing is read": said(_SYNC.pattern) or _stated(h["sync"], note),
            f"the statistic (the median of {h['samples']} samples)": said(r"median", rf"\b{h['samples']}\b"),
            "the spread (q80 - q20)": said(r"spread", r"20", r"80"),
            f"where the raw samples are ({h['raw_samples']})": h["raw_samples"] in note}
    return [k for k, ok in need.items() if not ok]


#: A statement of how the device is synchronized before a timing is read, in any words: synchronized, waits for the
#: device or kernel to finish, blocks until, CPU calls return when done, CUDA events.
_SYNC = re.compile(r"synchron|\bsync|\bwait(s|ed|ing)?\b[^.]*\b(device|gpu|kernel|finish\w*|complet\w*|done)\b|"
                   r"\bblock(s|ed|ing)?\b[^.]*\buntil\b|\breturns?\b[^.]*\b(when|once|after)\b[^.]*"
                   r"\b(done|finish\w*|complet\w*)\b|\bcuda events?\b", re.IGNORECASE)


def _stated(fact: str, note: str) -> bool:
    """Whether ``note`` gives the harness's own statement ``fact`` (its text after a ``label:``), spacing and case
    aside."""
    said = " ".join(fact.split(":", 1)[-1].split()).lower()
    return bool(said) and said in " ".join(note.split()).lower()


def _datasets():
    return (("GPU-shaped data", synthetic_results(), synthetic_environment()),
            ("a GPU-shaped table drawn now", drawn_results(), _drawn_environment()),
            ("CPU-shaped data", interpreter_results(), interpreter_environment()))


_LABEL = re.compile(r"^\W*scope\W*:?\**\s*(.*)$", re.IGNORECASE)
#: Where a labelled statement ends: a blank line, a heading, a list item, a table row, a tag or another ``Label:``.
_STATEMENT_END = re.compile(r"^\s*($|#|[-*+]\s|\d+[.)]\s|\||<|\**[A-Z][\w /-]{0,30}\**:)")


def _scope_text(note: str, sections: dict[str, str]) -> str:
    """The scope sections' text, and each ``Scope:`` statement read whole, over the lines it wraps onto."""
    text = " ".join(body for head, body in sections.items() if "scope" in head)
    lines = note.splitlines()
    for i, line in enumerate(lines):
        m = _LABEL.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        statement = [m.group(1)]
        for more in lines[i + 1:]:
            if _STATEMENT_END.match(more):
                break
            statement.append(more.strip())
        text += " " + " ".join(statement)
    return text


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
    for which, df, _ in data:
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


def _judge_sections(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, _env in data:
        found = _sections(notes[which])
        for name, pat in SECTIONS.items():
            bodies = [b for h, b in found.items() if re.search(pat, h)]
            if not bodies:
                problems.append(f"{which}: no '## ...' heading for {name}")
            elif not any(_words(b) >= 5 and not _PLACEHOLDER.search(b.strip()) for b in bodies):
                problems.append(f"{which}: the {name} section is empty (say something in at least a sentence)")
            elif name == "performance" and not any(all(str(c) in b for c in df["case_id"]) for b in bodies):
                problems.append(f"{which}: the performance section does not list this table's cases")
    if problems:
        raise Fail("missing or empty sections\n" + "\n".join(problems))


def _judge_environment_and_scope(data, notes: dict[str, str]) -> None:
    problems = []
    for which, _df, env in data:
        note = notes[which]
        for key in ("device_name" if env.get("device_name") else "device", "torch", "triton"):
            if str(env[key]) not in note:
                problems.append(f"{which}: the note does not give the environment's {key} ({env[key]!r})")
        scope = _scope_text(note, _sections(note))
        if _words(scope) < 12:
            problems.append(f"{which}: no scope statement (a 'Scope' section or a 'Scope:' line of a sentence "
                            f"or two: which calls take the fast path, and what happens to the rest)")
        else:
            low = scope.lower()
            need = {f"the column limit ({rms.MAX_COLS})": str(rms.MAX_COLS) in scope,
                    "the dtypes it covers": bool(re.search(r"fp16|float16|half", low))
                    and bool(re.search(r"bf16|bfloat16", low)),
                    "what happens outside it (the fallback)": "fallback" in low or "f.rms_norm" in low}
            gaps = [k for k, ok in need.items() if not ok]
            if gaps:
                problems.append(f"{which}: the scope statement does not name " + ", ".join(gaps))
    if problems:
        raise Fail("\n".join(problems))


#: A sentence that says nothing is slower: never slower, no regressions or slowdowns, without losses, always faster.
_NO_LOSS = re.compile(r"\bnever\b[^.;]*\b(slower|regress\w*|los(e|es|ing|ses))\b|"
                      r"\b(no|without|zero)\b[^.;]*\b(regressions?|slow-?downs?|loss(es)?|slower)\b|"
                      r"\bnot\b[^.;]*\bslower\b|\balways\b[^.;]*\b(faster|wins?|ahead)\b", re.IGNORECASE)
#: Words that make such a sentence a qualified one (it names its exceptions).
_EXCEPT = re.compile(r"\b(except|but|apart from|other than|besides|outside|beyond|elsewhere|otherwise)\b",
                     re.IGNORECASE)


def _denies_losses(note: str, losses: list[str]) -> list[str]:
    """The sentences of ``note`` that say nothing is slower (never slower, without regressions) while naming none of
    the ``losses`` and no exception."""
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n", note):
        if _NO_LOSS.search(sentence) and not _EXCEPT.search(sentence) and not any(c in sentence for c in losses):
            out.append(sentence.strip())
    return out


def _judge_consistent(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, env in data[:2]:
        note = notes[which]
        exp = expected_classes(df)
        routes = dict(zip(df["case_id"], df["route"]))
        rows = _table_rows(note)
        for cid, cls in exp.items():
            if cid not in rows:
                problems.append(f"{which}, {cid}: not in the performance table")
                continue
            cells = [c.lower() for c in rows[cid][0]]
            route = _route_cell(cells, rows[cid][1])
            claimed = [k for k in OUTCOMES if k in cells[1:] and (k != route or cells.count(k) > 1)]
            if route != routes[cid]:
                problems.append(f"{which}, {cid}: the row gives route {route or 'none'}, the data {routes[cid]}")
            if claimed != [cls]:
                problems.append(f"{which}, {cid}: the table says {claimed or 'no class'}, the data says {cls}")
        for cls in TIMED_OUTCOMES:
            if cls in exp.values() and not re.search(rf"\b{cls}", note, re.IGNORECASE):
                problems.append(f"{which}: the note never names its {cls} cases")
        losses = [c for c, k in exp.items() if k == LOSS]
        for sentence in (_denies_losses(note, losses) if losses else ()):
            problems.append(f"{which}: the note says {sentence!r}, but the data has {len(losses)} "
                            f"{LOSS if len(losses) == 1 else LOSS + 'es'} ({', '.join(losses)}): say where it is "
                            "slower, as the table does")
        if env.get("synthetic") and "synthetic" not in note.lower():
            problems.append(f"{which}: the data is labelled synthetic; the note must say so")
    if problems:
        raise Fail(f"{len(problems)} inconsistencies with the data\n" + "\n".join(problems))


def _judge_method(data, notes: dict[str, str]) -> None:
    problems = []
    for which, _df, env in data:
        gaps = _method_gaps(notes[which], env["harness"])
        if gaps:
            problems.append(f"{which}: the note does not give " + "; ".join(gaps))
    if problems:
        raise Fail("how the numbers were measured is missing\n" + "\n".join(problems))


def claims_speedup(sentence: str) -> bool:
    """Whether a sentence claims a speed-up: a multiplier or a speed word, neither negated nor conditional. A shape is
    not a multiplier.

    >>> [claims_speedup(s) for s in ("The kernel is 1.4x faster.", "A 4096 x 4096 input took 9 s.",
    ...                              "No speed-up is claimed.", "Whether it is faster needs a GPU run.")]
    [True, False, False, False]
    """
    return bool(_SPEEDUP.search(sentence)) and not _NEGATION.search(sentence)


def _judge_no_cpu_claims(data, notes: dict[str, str]) -> None:
    which, df, env = data[2]
    note = notes[which]
    problems = []
    if NOT_GPU.lower() not in note.lower():
        problems.append(f"on CPU data the note must say {NOT_GPU!r}")
    for sentence in re.split(r"(?<=[.!?;])\s+|\n", note):
        if claims_speedup(sentence):
            problems.append(f"claims a speed-up from non-GPU data: {sentence.strip()!r}")
    wins = [c for c, (cells, _) in _table_rows(note).items() if {WIN, LOSS} & {x.lower() for x in cells}]
    if wins:
        problems.append(f"the table marks {wins} as wins or losses from non-GPU data")
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
