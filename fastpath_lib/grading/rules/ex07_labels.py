"""Exercise 07: the labelled lines of a PR note, the only prose a program scores, each held to the data.

A **labelled line** is a line of a rendered paragraph or list item that opens with a known label and a colon
(``Timer: triton.testing.do_bench``, ``- c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)``; the label may be bold or
in backticks); it runs to the next labelled line or the end of its paragraph or item. The labels: ``Environment``,
``Scope``, ``Outcomes``, the six of the method (:data:`METHOD_LABELS`) and a case id of the table (a case line). Every
other line is prose: a person reads it, the grader scores none of it (:mod:`~fastpath_lib.grading.checks.ex07_note`
keeps two lose-rules for prose, nothing else).

A labelled line earns only where a reader sees it as the note's own plain text (:func:`lines`); one anywhere in the
note's text, in raw HTML, struck, in a block quote, a code block or a heading too (``checked``), is held to the data.

>>> [(x.label, x.value) for x in lines("## Summary\\nOutcomes: 3 win, 1 loss\\n- **c05**: loss, 9 -> 9.8 us", ["c05"])]
[('outcomes', '3 win, 1 loss'), ('c05', 'loss, 9 -> 9.8 us')]
>>> outcome_counts("4 wins, 2 neutral, 1 loss; 3 fallback."), outcome_counts("4 wins and 2 ties")
(({'win': 4, 'neutral': 2, 'loss': 1, 'fallback': 3}, []), ({'win': 4}, ['2 ties']))
>>> version_given("torch", "2.5.1", "GPU, torch 2.5.1."), version_given("torch", "2.5.1", "torch==2.5.10")
(True, False)
>>> case_class("loss, 9.0 -> 9.8 us (+8.9 %)"), case_class("slower (9 -> 9.8 us)")
(('loss', '9.0 -> 9.8 us (+8.9 %)'), (None, 'slower (9 -> 9.8 us)'))
"""

from __future__ import annotations

import dataclasses
import re

from fastpath_lib.grading.rules.ex07_claims import figures, figures_in, is_figure
from fastpath_lib.grading.rules.rendered import blocks
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, OUTCOMES, WIN

__all__ = ["Line", "lines", "prose", "outcome_counts", "case_class", "METHOD_LABELS", "FORMS", "environment_problems",
           "outcome_problems", "case_problems", "method_problems", "version_given"]

#: The method's labels -> the harness record's key each states.
METHOD_LABELS = {"timer": "timer", "warm-up": "warmup_ms", "synchronization": "sync", "statistic": "statistic",
                 "spread": "spread", "raw samples": "raw_samples"}
#: Other spellings of a label.
_ALIASES = {"warmup": "warm-up", "warm up": "warm-up", "synchronisation": "synchronization", "sync": "synchronization",
            "raw samples file": "raw samples", "raw": "raw samples", "outcome": "outcomes", "env": "environment"}
_KNOWN = {"environment", "scope", "outcomes", *METHOD_LABELS}
#: label -> the form the feedback shows (formatted with the environment's harness record).
FORMS = {"environment": "Environment: DEVICE, torch X, triton Y",
         "outcomes": "Outcomes: 4 win, 2 neutral, 1 loss, 3 fallback",
         "case": "- c05_1024x128_fp16: loss, 9.0 -> 9.8 us (+8.9 %)",
         "timer": "Timer: {timer}", "warm-up": "Warm-up: {warmup_ms} ms", "synchronization": "Synchronization: {sync}",
         "statistic": "Statistic: {statistic} of {samples} samples", "spread": "Spread: {spread}",
         "raw samples": "Raw samples: {raw_samples}"}
_LINE = re.compile(r"^[\s*_`]*(?P<label>[^:*`\n]{1,60}?)[\s*_`]*:[*_`]*[ \t]*(?P<value>.*)$")


@dataclasses.dataclass(frozen=True)
class Line:
    """A labelled line: its ``label`` (lower case, or the case id as written), its ``value`` (after the colon, over
    the lines it wraps onto), the ``text`` as rendered and the ``section`` it stands in (the headings over it, outermost
    first, lower case, joined by `` > ``: a subsection is part of its section)."""

    label: str
    value: str
    text: str
    section: str


def _label(raw: str, ids) -> str | None:
    """The label ``raw`` names: a known one (:data:`_KNOWN`, :data:`_ALIASES`) or a case id of ``ids``."""
    raw = raw.strip()
    if raw in ids:
        return raw
    key = " ".join(raw.lower().replace("_", " ").split())
    key = _ALIASES.get(key, key)
    return key if key in _KNOWN else None


def lines(note: str, ids=(), *, checked: bool = False) -> list[Line]:
    """The note's labelled lines, in order (``ids``: the case ids a case line may name); ``checked``: in all its
    text, a reader might see it or not."""
    ids = {str(c) for c in ids}
    out: list[Line] = []
    heads: list[tuple[int, str]] = []  # the headings a block stands under, outermost first
    for b in blocks(note, checked=checked):
        if b.kind == "heading":
            heads = [(lv, h) for lv, h in heads if lv < b.level] + [(b.level, b.text.lower())]
        elif b.kind == "prose":
            found: list[list[str]] = []
            for raw in b.text.splitlines():
                m = _LINE.match(raw)
                label = _label(m.group("label"), ids) if m else None
                if label is not None:
                    found.append([label, m.group("value").strip(), raw.strip()])
                elif found:  # a wrapped line continues its label's
                    found[-1][1] = f"{found[-1][1]} {raw.strip()}".strip()
                    found[-1][2] = f"{found[-1][2]} {raw.strip()}"
            section = " > ".join(h for _, h in heads)
            out += [Line(label, value, text, section) for label, value, text in found]
    return out


def prose(note: str, ids=()) -> list[str]:
    """The paragraphs and list items a reader sees that hold no labelled line: read by a person, not scored."""
    return [b.text for b in blocks(note) if b.kind == "prose" and not lines(b.text.replace("\n", "\n\n"), ids)]


_CLASS = {**{c: c for c in OUTCOMES}, WIN + "s": WIN, NEUTRAL + "s": NEUTRAL, LOSS + "es": LOSS,
          FALLBACK + "s": FALLBACK}
_ITEM = re.compile(r"(\d+)\s+(\w+)(?:\s+cases?)?(?:\s*\([^()]*\))?")
#: Where an ``Outcomes:`` line's items part: ``,``, ``;`` or ``and``, outside parentheses.
_ITEMS = re.compile(r"\s*(?:[,;]|\band\b)\s*(?![^()]*\))")


def outcome_counts(value: str) -> tuple[dict[str, int], list[str]]:
    """What an ``Outcomes:`` line counts (class -> N, each item ``N CLASS``, plural or not, a parenthesis after it or
    not; items split at ``,``, ``;`` and ``and``) and its items not in that form."""
    counts: dict[str, int] = {}
    bad = []
    for item in (i.strip(" .") for i in _ITEMS.split(value)):
        m = _ITEM.fullmatch(item)
        if m and m.group(2).lower() in _CLASS:
            counts[_CLASS[m.group(2).lower()]] = int(m.group(1))
        elif item:
            bad.append(item)
    return counts, bad


def case_class(value: str) -> tuple[str | None, str]:
    """A case line's class (its first word: win, neutral, loss or fallback, plural or not) and the rest."""
    m = re.match(r"\s*(\w+)\b[\s,;:]*", value)
    word = m.group(1).lower() if m else ""
    return (_CLASS[word], value[m.end():]) if word in _CLASS else (None, value)


def version_given(lib: str, version: str, text: str) -> bool:
    """Whether ``text`` gives ``version`` after the name ``lib`` (``torch 2.5.1``, ``triton==3.1.0``)."""
    return version in _versions(lib, text)


def _versions(lib: str, text: str) -> list[str]:
    """Every version ``text`` gives after the name ``lib``."""
    found = re.findall(rf"(?<![\w.])(?:py)?{lib}\W{{0,3}}(?:version\W{{0,2}}|v)?(\d[\w.+-]*?)(?=[,;)]?(?:\s|$)|[,;)])",
                       text, re.IGNORECASE)
    return [v.rstrip(".") for v in found]


def _held(seen: list[Line], every: list[Line]) -> list[Line]:
    """The lines held to the data: every one, as a reader sees it and as all its text reads (a class struck through
    and a visible one after it are both read)."""
    return list(dict.fromkeys([*seen, *every]))


def _quote(x: Line) -> str:
    return f"'{x.text}'"


def environment_problems(seen: list[Line], every: list[Line], env: dict) -> tuple[list[str], list[str]]:
    """``(missing, wrong)``: what no ``Environment:`` line a reader sees gives (the device, each version after its
    name), and each value of any ``Environment:`` line the record contradicts (another version)."""
    device = str(env.get("device_name") or env.get("device"))
    mine = [x for x in seen if x.label == "environment"]
    missing = []
    if not mine:
        return [f"no `Environment:` line (the form: `{FORMS['environment']}`)"], []
    text = " ".join(x.value for x in mine)
    if " ".join(device.split()) not in " ".join(text.split()):
        missing.append(f"the `Environment:` line does not give the device ({device!r})")
    for lib in ("torch", "triton"):
        if not version_given(lib, str(env[lib]), text):
            missing.append(f"the `Environment:` line does not give {lib} {env[lib]} (the version after its name)")
    wrong = [f"{_quote(x)} gives {lib} {v}, the environment has {env[lib]}" for x in _held(seen, every)
             if x.label == "environment"
             for lib in ("torch", "triton") for v in _versions(lib, x.value) if v != str(env[lib])]
    return missing, list(dict.fromkeys(wrong))


def outcome_problems(seen: list[Line], every: list[Line], expected: dict, summary: str) -> list[str]:
    """An ``Outcomes:`` line under the Summary heading (``summary``: its pattern) giving the count of each class the
    data has, and every count of any ``Outcomes:`` line the data's."""
    tally = {k: sum(v == k for v in expected.values()) for k in OUTCOMES}
    out = []
    for x in _held(seen, every):
        if x.label != "outcomes":
            continue
        counts, bad = outcome_counts(x.value)
        out += [f"{_quote(x)} counts {n} {k}, the data has {tally[k]}" for k, n in counts.items() if n != tally[k]]
        out += [f"{_quote(x)}: {item!r} is not `N CLASS` (the form: `{FORMS['outcomes']}`)" for item in bad]
    mine = [x for x in seen if x.label == "outcomes" and re.search(summary, x.section)]
    if not mine:
        out.append(f"no `Outcomes:` line under the Summary heading (the form: `{FORMS['outcomes']}`: a count for "
                   f"each class the data has, here {', '.join(f'{n} {k}' for k, n in tally.items() if n)})")
    else:
        given = {k for x in mine for k in outcome_counts(x.value)[0]}
        left = [k for k, n in tally.items() if n and k not in given]
        if left:
            out.append(f"{_quote(mine[0])} gives no count of {' or '.join(left)} (the data has "
                       + ", ".join(f"{tally[k]} {k}" for k in left) + ")")
    return list(dict.fromkeys(out))


def case_problems(seen: list[Line], every: list[Line], rows: dict, expected: dict | None) -> list[str]:
    """Each case line against the data: its class (``expected``, None on non-GPU data: no class is held there) and
    every figure in it one of the case's own (:func:`~.ex07_claims.figures`); and, on GPU data, a case line a reader
    sees for each loss and each neutral case, with its class and at least one figure of its own."""
    out = []
    for x in _held(seen, every):
        if x.label not in rows:
            continue
        cls, rest = case_class(x.value)
        own = figures(rows[x.label])
        out += [f"{_quote(x)} gives {raw!r}, none of {x.label}'s figures" for v, d, raw in figures_in(rest)
                if not is_figure(v, d, own)]
        if expected is not None and cls is not None and cls != expected[x.label]:
            out.append(f"{_quote(x)} calls {x.label} {cls}, the data says {expected[x.label]}")
    for cid, k in (expected or {}).items():
        if k not in (LOSS, NEUTRAL):
            continue
        mine = [x for x in seen if x.label == cid]
        good = [x for x in mine if case_class(x.value)[0] == k and any(
            is_figure(v, d, figures(rows[cid])) for v, d, _ in figures_in(case_class(x.value)[1]))]
        if not good:
            why = (f"{_quote(mine[0])} is not `{cid}: {k}, FIGURE`" if mine else "no case line for it")
            out.append(f"{cid}: {k} in the data, and {why} (the form: `{FORMS['case']}`: the class, then at least "
                       "one figure of its own)")
    return list(dict.fromkeys(out))


_SYNC = re.compile(r"synchron|\bsync|\bwait|\bblock\w*\b[^.]*\buntil\b|\breturns?\b[^.]*\b(when|once|after)\b|"
                   r"\bcuda events?\b", re.IGNORECASE)
_SAMPLES = r"(?:samples?|runs?|timings?|repetitions|reps|measurements|iterations|trials)"


def _ranged(value: str, spread: str) -> bool:
    """Whether ``value`` gives the spread's two quantiles as a range (``q80 - q20``, ``20th to 80th percentile``)."""
    hi, lo = (sorted(re.findall(r"\d+", spread), key=int) or ["20", "80"])[::-1][:2]
    return bool(re.search(rf"q{hi}\s*[-−–]\s*q{lo}\b|q{lo}\s*(?:-|–|to|and)\s*q{hi}\b|(?<![\w.]){lo}\s*(?:%|th)?\s*"
                          rf"(?:-|–|to|and)\s*(?:the\s+)?{hi}\s*(?:%|th)?(?!\d)", value, re.IGNORECASE))


def _method_value(label: str, value: str, h: dict) -> tuple[bool, str | None]:
    """``(given, wrong)``: whether ``value`` states the record's fact for ``label``, and what in it contradicts
    the record."""
    if label == "timer":
        return h["timer"] in value, None
    if label == "warm-up":
        said = [float(n) for n in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)\s*ms\b", value)]
        wrong = next((f"{n:g} ms" for n in said if n != float(h["warmup_ms"])), None)
        return float(h["warmup_ms"]) in said, wrong
    if label == "synchronization":
        own = " ".join(h["sync"].split(":", 1)[-1].split()).lower()
        return bool(_SYNC.search(value)) or own in " ".join(value.split()).lower(), None
    if label == "statistic":
        said = [int(n) for n in re.findall(rf"(?<![\w.])(\d+)\s+(?:\w+\s+)?{_SAMPLES}\b", value, re.IGNORECASE)]
        wrong = next((f"{n} samples" for n in said if n != int(h["samples"])), None)
        named = re.search(rf"\b{re.escape(h['statistic'])}s?\b", value, re.IGNORECASE)
        return bool(named) and int(h["samples"]) in said, wrong
    if label == "spread":
        return _ranged(value, h["spread"]), None
    return h["raw_samples"] in value, None


def method_problems(seen: list[Line], every: list[Line], h: dict) -> list[str]:
    """Each method label a reader sees with the record's fact (:data:`FORMS`), and no method line anywhere that
    contradicts the record (another warm-up, another sample count)."""
    out = []
    for label in METHOD_LABELS:
        mine = [x for x in seen if x.label == label]
        if not any(_method_value(label, x.value, h)[0] for x in mine):
            form = FORMS[label].format(**h)
            out.append(f"{_quote(mine[0])} does not give it as `{form}`" if mine else f"no `{form}` line")
    for x in _held(seen, every):
        if x.label in METHOD_LABELS and (wrong := _method_value(x.label, x.value, h)[1]):
            out.append(f"{_quote(x)} gives {wrong}, the record {FORMS[x.label].format(**h)!r}")
    return out
