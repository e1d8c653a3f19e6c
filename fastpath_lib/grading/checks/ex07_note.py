"""Exercise 07: the PR note, written from a results table and its environment record, graded on what a program can
decide.

``write_pr_note(results_df, env) -> str`` is called on the synthetic GPU-shaped table of exercise 06, on a table
drawn afresh at every call (so a note written for the fixed table alone does not pass), and on CPU-interpreter-shaped
data. Points are earned only from structured elements, each counted only where it matches its stated form exactly
(:mod:`~fastpath_lib.grading.rules.ex07_forms`: the six section headings, the performance table, the labelled lines
``Environment:``, ``Scope:``, ``Outcomes:``, a case line per loss and neutral case and the six method lines); every
value in them is then compared exactly with the table and the environment record (figures rounded to the digits
written). Anything else is prose: it earns nothing, a person reads it, and it loses points in one case a program
decides reliably: a sentence that denies every loss while the table has losses.

Every part is judged only on a note with substance on each table (:func:`substance_gaps`). Six parts: the sections;
concision (at most :data:`WORD_LIMIT` words a reader sees: outside closed ``<details>`` blocks); the environment and
the scope; consistency with the data; the measurement method of ``env["harness"]`` (the drawn table comes with a drawn
harness, so a method copied from the fixed one fails); and no win or loss marked on non-GPU data.
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
from fastpath_lib.grading.rules import ex07_forms as forms
from fastpath_lib.grading.rules.assertion import asserted
from fastpath_lib.grading.rules.ex07_claims import claims_speedup, words_outside_details
from fastpath_lib.grading.rules.ex07_wording import (
    CASE_RULE,
    COVERED,
    CPU_RULE,
    ENVIRONMENT_RULE,
    FIGURE_RULE,
    KINDS,
    LABEL_RULE,
    METHOD_RULE,
    NAMED_WITH_FIGURES,
    NO_LOSS_RULE,
    OUTCOMES_RULE,
    PROSE_NOTE,
    SCOPE_RULE,
    SECTION_RULE,
    STATED,
    SUBSTANCE_RULE,
    SYNTHETIC,
    TABLE_RULE,
)
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, NOT_GPU, OUTCOMES, WIN
from fastpath_lib.rmsnorm import predicate as rms

__all__ = ["check_pr_note", "SECTIONS", "WORD_LIMIT", "words_outside_details", "substance_gaps", "STATED",
           "claims_speedup"]

#: The most words a note may show outside closed ``<details>`` blocks (the kit's own rule for its PR notes, restated
#: here and tied to it by ``tests/bench/test_pr_concise.py``: the grader imports nothing of the kit's note).
WORD_LIMIT = 600
#: The six sections, each the whole text of its heading.
SECTIONS = forms.SECTION_NAMES
_PLACEHOLDER = re.compile(r"\b(todo|tbd|fill me in|lorem ipsum|xxx)\b|^\W*$", re.IGNORECASE)
_FORBIDDEN = borrowed.kit("bench", why="that is the kit's own PR note") + borrowed.kit(
    "grading/checks/ex07_note.py", why="that is the grader's own answer") + borrowed.kit(
    "grading/rules/ex07_claims.py", why="that is the grader's own reading of a note") + borrowed.kit(
    "grading/rules/rendered.py", why="that is the grader's own reading of a note") + borrowed.kit(
    "grading/rules/ex07_forms.py", why="that is the grader's own reading of a note")
_GIVEN = borrowed.given("grading/given.py", "expected_classes", why="given") + borrowed.given(
    "grading/materials.py", "synthetic_results", "synthetic_environment", why="given")
_FORM = {"environment": ENVIRONMENT_RULE, "scope": SCOPE_RULE, "outcomes": OUTCOMES_RULE, "case": CASE_RULE,
         **{k: METHOD_RULE for k in forms.METHOD_LABELS}}


def _rows(df) -> dict:
    return {str(r["case_id"]): r for _, r in df.iterrows()}


def _on_gpu(env) -> bool:
    return env.get("device") == "cuda"


def _classes(df, env) -> dict[str, str]:
    """case -> the class its case line and row must give: exercise 06's on GPU data, else :data:`forms.CPU_CLASS`."""
    if _on_gpu(env):
        return expected_classes(df)
    return {str(c): forms.CPU_CLASS for c in df["case_id"]}


def _is_class(written: str, cid: str, rows: dict, classes: dict) -> bool:
    """Whether ``written`` is the case's class (on non-GPU data a case that took the fallback may say so)."""
    written = written.strip().lower()
    return written == classes[cid] or (classes[cid] == forms.CPU_CLASS and written == FALLBACK
                                       and str(rows[cid]["route"]) == FALLBACK)


def _elements(note: str, df) -> list[forms.Element]:
    return forms.read(note, [str(c) for c in df["case_id"]])


def _figures_ok(row, fields: dict, unit: str = "us") -> bool:
    """Whether a case line's or row's figures are the case's medians (and its change) rounded to the digits written."""
    scale = 1000.0 if unit.lower() == "ms" else 1.0
    b, c = float(row["baseline_median_us"]), float(row["candidate_median_us"])
    ok = forms.rounded(fields["b"], b / scale) and forms.rounded(fields["c"], c / scale)
    if ok and fields.get("chg") and b > 0:
        chg = re.sub(r"[,\u2009\u202f]", "", fields["chg"].replace("−", "-"))
        digits = len(chg.split(".")[1]) if "." in chg else 0
        ok = abs(float(chg) - 100 * (c / b - 1)) <= 0.5 * 10.0 ** -digits + 1e-9
    return bool(ok)


def _row_fields(e: forms.Element) -> dict | None:
    """A canonical row's five cells where each matches its form (``fields`` as a case line's), else None."""
    if not e.canonical or len(e.cells) < 5:
        return None
    route, b, c, cls = (x.strip() for x in e.cells[1:5])
    if route.lower() not in ("triton", "fallback") or not all(re.fullmatch(r"\d[\d,]*(\.\d+)?", x) for x in (b, c)):
        return None
    return {"route": route.lower(), "b": b, "c": c, "cls": cls.lower()}


def _case_ok(e: forms.Element, rows: dict, classes: dict) -> bool:
    """A seen case line or canonical row that matches its form with the data's class and figures."""
    if e.disguised or e.label not in rows:
        return False
    if e.kind == "case" and e.fields:
        return _is_class(e.fields["cls"], e.label, rows, classes) and _figures_ok(rows[e.label], e.fields,
                                                                                  e.fields["unit"])
    f = _row_fields(e) if e.kind == "row" else None
    return bool(f) and _is_class(f["cls"], e.label, rows, classes) and _figures_ok(rows[e.label], f)


def _with_figures(note: str, df, env) -> set[str]:
    """The cases the note's seen case lines or performance table rows give figures that match the data."""
    rows, classes = _rows(df), _classes(df, env)
    return {e.label for e in _elements(note, df) if e.seen and _case_ok(e, rows, classes)}


def substance_gaps(note: str, df, env=None) -> list[str]:
    """What a note lacks to be judged at all on table ``df``: case lines or table rows giving at least
    :data:`NAMED_WITH_FIGURES` of the table's cases (all of a shorter table) figures that match the data."""
    env = env if env is not None else {"device": "cuda"}
    need, named = min(NAMED_WITH_FIGURES, len(df)), _with_figures(note, df, env)
    if len(named) >= need:
        return []
    return [f"it gives {len(named)} of this table's {len(df)} cases figures that match the data (at least {need}: "
            f"{SUBSTANCE_RULE}; {FIGURE_RULE})"]


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
    for which, df, env in data:
        gaps = substance_gaps(notes[which], df, env)
        if gaps:
            problems.append(f"{which}: " + "; ".join(gaps))
    if problems:
        raise Fail("not judged: the note has no substance (write it from the table it is given: name its cases, give "
                   "their numbers, say what they show)\n" + "\n".join(problems) + _malformed(data, notes))


def _judge_concise(data, notes: dict[str, str]) -> str:
    counts = {which: words_outside_details(notes[which]) for which, df, env in data}
    said = "; ".join(f"{which}: {n}" for which, n in counts.items())
    if max(counts.values()) > WORD_LIMIT:
        raise Fail(f"too long: words outside closed <details> blocks ({said}), at most {WORD_LIMIT}. Keep the summary, "
                   "the scope, the counts and the claim in sight; fold the full tables in "
                   "<details><summary>...</summary> ... </details>")
    # the drawn table's count changes with each draw: a passing verdict reads the same on every run
    return f"every note keeps at most {WORD_LIMIT} words outside closed <details> blocks"


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


def _malformed(data, notes: dict[str, str]) -> str:
    """What the feedback says of each seen line that looks like an element but does not match its form."""
    out = []
    for which, df, _env in data:
        for e in _elements(notes[which], df):
            if e.seen and e.kind != "row" and e.fields is None and not e.disguised:
                out.append(f"{which}: {e.text!r} is read as prose: the form is {_FORM[e.kind]}")
    return "".join(f"\n{x}" for x in dict.fromkeys(out))


def _judge_sections(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, _env in data:
        note = notes[which]
        found_raw = claims.sections(note)
        own = _own_sentences(note)
        for name in SECTIONS:
            heads = [h for h in found_raw if " ".join(h.rstrip(":").split()) == name]
            if not heads:
                problems.append(f"{which}: no '## ...' heading that is exactly {name!r}")
            elif not any(own[h] or claims.all_table_rows(found_raw[h]) or _elements(found_raw[h], df)
                         for h in heads):
                problems.append(f"{which}: the {name} section says nothing of its own")
    if problems:
        raise Fail("missing or empty sections\n" + "\n".join(problems) + f"\n(the rule: {SECTION_RULE})")


def _seen(elements, kind: str) -> list[forms.Element]:
    return [e for e in elements if e.seen and e.kind == kind and e.fields is not None and not e.disguised]


def _kind(env) -> str:
    return NOT_GPU if not _on_gpu(env) else SYNTHETIC if env.get("synthetic") else KINDS[0]


def _environment_wrong(f: dict, env) -> list[str]:
    device = str(env.get("device_name") or env.get("device"))
    out = []
    if " ".join(f["device"].lower().split()) != " ".join(device.lower().split()):
        out.append(f"gives device {f['device']!r}, the record {device!r}")
    out += [f"gives {lib} {f[lib]}, the record {env[lib]}" for lib in ("torch", "triton") if f[lib] != str(env[lib])]
    kind = " ".join(f["kind"].lower().split())
    if kind != _kind(env).lower():
        out.append(f"gives {f['kind']!r}, the data is {_kind(env)!r}")
    return out


def _scope_wrong(f: dict) -> list[str]:
    out = []
    if sorted(f["dtypes"]) != sorted(COVERED) or len(f["dtypes"]) != len(COVERED):
        out.append(f"names {', '.join(f['dtypes'])}; the fast path covers exactly {', '.join(COVERED)}")
    n = int(re.sub(r"\D", "", f["n"]))
    if n != rms.MAX_COLS:
        out.append(f"gives a column limit of {n}; the fast path's is {rms.MAX_COLS} (`MAX_COLS`)")
    return out


def _judge_environment_and_scope(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, env in data:
        found = _elements(notes[which], df)
        for kind, rule in (("environment", ENVIRONMENT_RULE), ("scope", SCOPE_RULE)):
            mine = [e for e in found if e.kind == kind and e.fields is not None and not e.disguised]
            if not any(e.seen for e in mine):
                problems.append(f"{which}: no `{kind.capitalize()}:` line in its form ({rule})")
            for e in mine:
                wrong = _environment_wrong(e.fields, env) if kind == "environment" else _scope_wrong(e.fields)
                problems += [f"{which}: {e.text!r} {w}" for w in wrong]
    if problems:
        raise Fail("\n".join(problems) + _malformed(data, notes))


#: A loss word and a word that denies every one, in one clause, in either order ("never slower", "0 losses",
#: "slower on no shape", "Losses: none"); "no slower" compares one thing.
_LOSS_WORD = r"\b(?:slower|loss(?:es)?|regress(?:ions?|ed|es)?|worse)\b"
_DENIER = r"(?:\bnever\b|\bnothing\b|\bnowhere\b|\bnone\b|\bwithout\b|\bzero\b|(?<![\w.])0(?![\w.%])|" \
          r"\bnot a single\b|\bnot one\b|\bno\b(?!\s+(?:faster\s+(?:and|or|nor)\s+no\s+)?slower\b))"
_NO_LOSS = re.compile(rf"{_DENIER}[^.;,!?]*?{_LOSS_WORD}|{_LOSS_WORD}[^.;,!?]*?{_DENIER}", re.IGNORECASE)
_EXCEPT = re.compile(r"\b(except|other than|fallbacks?|triton)\b", re.IGNORECASE)


def _denies_losses(note: str, ids) -> list[str]:
    """The sentences of ``note`` (all its text) that deny every loss (:data:`_NO_LOSS`) while naming no case of
    ``ids``, no route and no exception; a sentence that hopes or asks it says none (:func:`asserted`)."""
    named = claims.id_pattern(ids)
    return [s for s in claims.statements(note, checked=True)
            if any(asserted(s, m.start()) for m in _NO_LOSS.finditer(s))
            and not _EXCEPT.search(s) and not named.search(s)]


def _held(e: forms.Element, rows: dict, classes: dict, routes: dict) -> list[str]:
    """What a case line or row that a reader might see (or not) claims against the data."""
    if e.disguised:
        return [f"{e.text!r} writes {e.disguised} with characters outside ASCII (a disguised element; {LABEL_RULE})"]
    if e.kind == "case":
        if e.fields is None:
            return []
        bad = [] if _is_class(e.fields["cls"], e.label, rows, classes) else [
            f"calls {e.label} {e.fields['cls']}, the data says {classes[e.label]}"]
        if not _figures_ok(rows[e.label], e.fields, e.fields["unit"]):
            bad.append(f"gives figures that are not {e.label}'s ({FIGURE_RULE})")
        return [f"{e.text!r} {b}" for b in bad]
    bad = []
    for h, cell in zip(e.header, e.cells):
        h, cell = h.lower(), cell.strip()
        if h == "route" and cell.lower() != routes[e.label]:
            bad.append(f"gives route {cell!r}, the data {routes[e.label]}")
        if h in ("class", "outcome", "verdict") and not _is_class(cell, e.label, rows, classes):
            bad.append(f"says {cell!r}, the data says {classes[e.label]}")
    if e.canonical and not _case_ok(e, rows, classes) and not bad:
        bad.append("does not match the performance table's form or the data")
    return [f"the row '{e.text}' {b}" for b in bad]


def _table_problems(which: str, note: str, df, classes: dict) -> list[str]:
    """The performance table under the Performance heading: a row for each case, in its form, true."""
    perf = "\n".join(body for h, body in claims.sections(note).items() if " ".join(h.split()) == "performance")
    rows = _rows(df)
    found = {e.label for e in _elements(perf, df) if e.kind == "row" and e.seen and _case_ok(e, rows, classes)}
    missing = [c for c in rows if c not in found]
    return [f"{which}: no performance table row in its form for {', '.join(missing)} ({TABLE_RULE})"] if missing else []


def _case_line_problems(which: str, elements, classes: dict) -> list[str]:
    """On GPU data: a case line a reader sees, in its form, for each loss and each neutral case."""
    out = []
    for cid, k in classes.items():
        if k in (LOSS, NEUTRAL) and not any(e.label == cid for e in _seen(elements, "case")):
            out.append(f"{which}: {cid} is a {k} in the data, and no case line for it is in its form ({CASE_RULE})")
    return out


def _outcome_problems(which: str, note: str, df, elements, classes: dict) -> list[str]:
    tally = {k: sum(v == k for v in classes.values()) for k in OUTCOMES}
    out = [f"{which}: {e.text!r} counts {n} {k}, the data has {tally[k]}" for e in elements
           if e.kind == "outcomes" and e.fields and not e.disguised for k, n in e.fields.items() if n != tally[k]]
    summary = "\n".join(body for h, body in claims.sections(note).items() if " ".join(h.split()) == "summary")
    if not _seen(_elements(summary, df), "outcomes"):
        out.append(f"{which}: no `Outcomes:` line in its form under the Summary heading ({OUTCOMES_RULE})")
    return out


def _judge_consistent(data, notes: dict[str, str]) -> str:
    problems = []
    for which, df, env in data:
        note, rows, classes = notes[which], _rows(df), _classes(df, env)
        found, routes = _elements(note, df), dict(zip(map(str, df["case_id"]), df["route"]))
        for e in found:
            if e.kind in ("case", "row") or e.disguised:
                problems += [f"{which}: {p}" for p in _held(e, rows, classes, routes)]
        problems += _table_problems(which, note, df, classes)
        if not _on_gpu(env):
            continue
        problems += _outcome_problems(which, note, df, found, classes) + _case_line_problems(which, found, classes)
        losses = [c for c, k in classes.items() if k == LOSS]
        for sentence in (_denies_losses(note, list(rows)) if losses else ()):
            problems.append(f"{which}: the note says {sentence!r}, but the data has {len(losses)} "
                            f"{LOSS if len(losses) == 1 else LOSS + 'es'} ({', '.join(losses)}): say where it is "
                            f"slower, as the table does ({NO_LOSS_RULE})")
        if env.get("synthetic") and not any(e.fields["kind"].lower() == SYNTHETIC
                                            for e in _seen(found, "environment")):
            problems.append(f"{which}: the data is labelled synthetic; no `Environment:` line in its form says "
                            f"`{SYNTHETIC}`")
    n = len(forms.prose(notes[data[0][0]], data[0][1]["case_id"]))
    prose = f"{PROSE_NOTE}: {n} such paragraphs and list items in the note on {data[0][0]}"
    if problems:
        raise Fail(f"{len(problems)} inconsistencies with the data\n" + "\n".join(dict.fromkeys(problems))
                   + _malformed(data, notes) + f"\n({prose})")
    return ("the table, the Outcomes line and the case lines agree with the data on every table, and no sentence "
            f"denies the losses; {prose}")


def _method_wrong(label: str, f: dict, h: dict) -> bool:
    if label == "warm-up":
        return float(f["warmup_ms"].replace(",", "")) != float(h["warmup_ms"])
    if label == "statistic":
        return f["statistic"] != str(h["statistic"]).lower() or f["samples"] != int(h["samples"])
    if label == "spread":
        return f["spread"] != tuple(sorted(map(int, re.findall(r"\d+", h["spread"]))))
    key = forms.METHOD_LABELS[label]
    return " ".join(f[key].lower().split()) != " ".join(str(h[key]).lower().rstrip(".").split())


def _judge_method(data, notes: dict[str, str]) -> None:
    problems = []
    for which, df, env in data:
        h, found = env["harness"], _elements(notes[which], df)
        for label in forms.METHOD_LABELS:
            form = {"timer": f"Timer: {h['timer']}", "warm-up": f"Warm-up: {h['warmup_ms']} ms",
                    "synchronization": f"Synchronization: {h['sync']}",
                    "statistic": f"Statistic: {h['statistic']} of {h['samples']} samples",
                    "spread": f"Spread: {h['spread']}", "raw samples": f"Raw samples: {h['raw_samples']}"}[label]
            mine = [e for e in found if e.kind == label and e.fields is not None and not e.disguised]
            wrong = [e for e in mine if _method_wrong(label, e.fields, h)]
            problems += [f"{which}: {e.text!r} contradicts the record (`{form}`)" for e in wrong]
            if not any(e.seen and e not in wrong for e in mine):
                problems.append(f"{which}: no `{form}` line")
    if problems:
        raise Fail(f"how the numbers were measured is missing or wrong (give {METHOD_RULE})\n" + "\n".join(problems)
                   + _malformed(data, notes))


#: A win or a loss marked on non-GPU data: a class word, a speed word or a multiplier (not a shape: ``4096 x 4096``).
_MARKED = re.compile(rf"\b({WIN}s?|{LOSS}(?:es)?|faster|slower|speed-?ups?)\b|"
                     r"(?<![\w.])\d+(?:\.\d+)?\s*[x×](?!\w|\s*\d)", re.IGNORECASE)


def _judge_no_cpu_claims(data, notes: dict[str, str]) -> None:
    which, df, env = data[2]
    note = notes[which]
    found, problems = _elements(note, df), []
    if not any(e.fields["kind"].lower() == NOT_GPU.lower() for e in _seen(found, "environment")):
        problems.append(f"no `Environment:` line in its form says {NOT_GPU!r}")
    for e in found:
        if e.kind == "case" and _MARKED.search(e.text.split(":", 1)[-1]):
            problems.append(f"{e.text!r} marks {e.label} a {WIN} or a {LOSS} from non-GPU data")
        if e.kind == "row" and any(_MARKED.search(c) for c in (*e.cells[1:], *e.header[1:])):
            problems.append(f"the row '{e.text}' marks {e.label} a {WIN} or a {LOSS} from non-GPU data")
        if e.kind == "outcomes" and e.fields and (e.fields.get(WIN) or e.fields.get(LOSS)):
            problems.append(f"{e.text!r} counts {WIN}s or {LOSS}es from non-GPU data")
    if problems:
        raise Fail("\n".join(dict.fromkeys(problems)) + f"\n(the rule: {CPU_RULE})")


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
