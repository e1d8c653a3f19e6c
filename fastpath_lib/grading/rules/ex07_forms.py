"""Exercise 07: the structured elements of a PR note, each read only where it matches its stated form exactly.

An element is a **labelled line** (a line of a rendered paragraph or list item that opens with an ASCII label and a
colon: ``Environment:``, ``Scope:``, ``Outcomes:``, a method label of :data:`METHOD_LABELS`, or a case id of the
table) or a **table row** (its first cell a case id). Its value must full-match the label's grammar (:func:`parse`);
a line that does not is prose: it earns nothing, is read by a person, and the feedback shows the form. Every value of
a matched element is then compared exactly with the data by the check
(:mod:`~fastpath_lib.grading.checks.ex07_note`); figures are the data's rounded to the digits written
(:func:`rounded`).

>>> parse("outcomes", "3 win, 4 neutral, 2 losses and 3 fallback")
{'win': 3, 'neutral': 4, 'loss': 2, 'fallback': 3}
>>> parse("outcomes", "12 win, 0 neutral, 0 loss, 0 fallback (final); 3 win") is None
True
>>> parse("case", "loss, 9.0 -> 9.8 us (+8.9 %)")["unit"], parse("case", "loss-free, 9.8 -> 9.0 us") is None
('us', True)
>>> rounded("9.8", 9.83), rounded("0", 0.0002), rounded("10", 9.6), rounded("9.8", 9.9)
(True, False, True, False)
>>> disguised("\\u0555utcomes", ["c05_1"]), disguised("c05\\u02cd1", ["c05_1"]), disguised("Outcomes", [])
('Outcomes', 'c05_1', None)
"""

from __future__ import annotations

import dataclasses
import re

from fastpath_lib.bench.schema import UNMEASURED
from fastpath_lib.grading.rules.rendered import Block, blocks, every_block
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, OUTCOMES, WIN

__all__ = ["Element", "read", "prose", "parse", "rounded", "disguised", "METHOD_LABELS", "LABELS", "HEADER",
           "CPU_CLASS", "SECTION_NAMES", "dtype_names"]

#: The class a case takes on data that is not a GPU measurement (the kit's own: no win, no loss).
CPU_CLASS = UNMEASURED
#: The method's labels -> the harness record's key each states.
METHOD_LABELS = {"timer": "timer", "warm-up": "warmup_ms", "synchronization": "sync", "statistic": "statistic",
                 "spread": "spread", "raw samples": "raw_samples"}
#: Every label (lower case) a labelled line may open with, besides a case id.
LABELS = ("environment", "scope", "outcomes", *METHOD_LABELS)
#: The performance table's header: its first five cells, exactly (``us`` or ``µs``).
HEADER = ("case", "route", "baseline us", "candidate us", "class")
_HEADER_ALT = {"baseline µs": "baseline us", "candidate µs": "candidate us", "baseline μs": "baseline us",
               "candidate μs": "candidate us"}
#: The six sections, each the whole text of its heading.
SECTION_NAMES = ("summary", "eligibility and fallback", "semantic evidence", "mechanism", "performance", "limitations")

_NUM = r"\d{1,3}(?:[, \u2009\u202f]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_CLASS_WORDS = {**{k: k for k in OUTCOMES}, WIN + "s": WIN, NEUTRAL + "s": NEUTRAL, LOSS + "es": LOSS,
                FALLBACK + "s": FALLBACK}
_SEP = re.compile(r"\s*(?:,\s*and\s+|,|;|\s+and\s+)\s*", re.IGNORECASE)
_CASE = re.compile(rf"(?P<cls>[A-Za-z][A-Za-z ]*?)\s*,\s*(?P<b>{_NUM})\s*(?:->|→)\s*(?P<c>{_NUM})\s*"
                   rf"(?P<unit>us|µs|μs|ms)(?:\s*\(\s*(?P<chg>[-+−]?(?:{_NUM}))\s*%\s*\))?\.?", re.IGNORECASE)
_ENV = re.compile(r"(?P<device>.+?)\s*,\s*torch\s+(?P<torch>\S+?)\s*,\s*triton\s+(?P<triton>\S+?)\s*,\s*"
                  r"(?P<kind>[^,]+(?:,[^,]+)?)\.?", re.IGNORECASE)
_SCOPE = re.compile(rf"(?P<dtypes>.+?)\s+inputs\s+of\s+at\s+most\s+(?:MAX_COLS\s*=\s*)?(?P<n>{_NUM})\s+columns\s*;"
                    r"\s*every\s+other\s+call\s+runs\s+(?:the\s+fallback,?\s+)?F\.rms_norm\.?", re.IGNORECASE)
_DTYPES = {"float16": ("fp16", "float16", "half", "torch.float16", "torch.half"),
           "bfloat16": ("bf16", "bfloat16", "torch.bfloat16"),
           "float32": ("fp32", "float32", "torch.float32", "torch.float")}
_LINE = re.compile(r"^[-*+]?\s*(?P<label>[^:\n]{1,60}?)\s*:\s*(?P<value>.*)$")


def dtype_names() -> dict[str, tuple[str, ...]]:
    """dtype -> the names a ``Scope:`` line may give it by."""
    return dict(_DTYPES)


def _num(text: str) -> float:
    return float(re.sub(r"[, \u2009\u202f]", "", text).replace("−", "-"))


def rounded(written: str, true: float) -> bool:
    """Whether ``written`` is ``true`` rounded to the digits written, with at least 2 significant digits written."""
    w = re.sub(r"[, \u2009\u202f+]", "", written).replace("−", "-")
    decimals = len(w.split(".")[1]) if "." in w else 0
    if len(w.replace(".", "").replace("-", "").lstrip("0")) < 2:
        return False
    return abs(float(w) - true) <= 0.5 * 10.0 ** -decimals + 1e-9


def _classes(value: str) -> dict[str, int] | None:
    items = [i for i in _SEP.split(value.strip().rstrip(".")) if i]
    counts: dict[str, int] = {}
    for item in items:
        m = re.fullmatch(r"(\d+)\s+([A-Za-z]+)", item)
        k = _CLASS_WORDS.get(m.group(2).lower()) if m else None
        if k is None or k in counts:
            return None
        counts[k] = int(m.group(1))
    return counts if set(counts) == set(OUTCOMES) else None


def _method(label: str, value: str) -> dict | None:
    v = " ".join(value.split()).rstrip(".").strip("`")
    if label == "warm-up":
        m = re.fullmatch(rf"({_NUM})\s*ms", v, re.IGNORECASE)
        return {"warmup_ms": m.group(1)} if m else None
    if label == "statistic":
        m = re.fullmatch(r"([A-Za-z]+) of (\d+) samples", v, re.IGNORECASE)
        return {"statistic": m.group(1).lower(), "samples": int(m.group(2))} if m else None
    if label == "spread":
        m = (re.fullmatch(r"[qp](\d+)\s*[-−–]\s*[qp](\d+)", v, re.IGNORECASE)
             or re.fullmatch(r"(?:the\s+)?(\d+)th\s+to\s+(?:the\s+)?(\d+)th\s+percentiles?", v, re.IGNORECASE))
        return {"spread": tuple(sorted(map(int, m.groups())))} if m else None
    return {METHOD_LABELS[label]: v}


def parse(label: str, value: str) -> dict | None:
    """The fields of a labelled line's ``value`` where it full-matches its label's form (``label``: a known label, or
    ``"case"``), else None."""
    value = " ".join(value.split())
    if label == "outcomes":
        return _classes(value)
    if label == "case":
        m = _CASE.fullmatch(value)
        return m.groupdict() if m else None
    if label == "environment":
        m = _ENV.fullmatch(value)
        return {k: v.strip() for k, v in m.groupdict().items()} if m else None
    if label == "scope":
        m = _SCOPE.fullmatch(value)
        if not m:
            return None
        names = [n.lower() for n in _SEP.split(m.group("dtypes").strip()) if n]
        found = [next((d for d, alias in _DTYPES.items() if n in alias), None) for n in names]
        return None if None in found else {"dtypes": found, "n": m.group("n")}
    return _method(label, value)


def disguised(label: str, known) -> str | None:
    """The known label or case id that ``label`` reads as once each character outside ASCII is read as any one
    character (a lookalike) or none (a format character), where ``label`` is not ASCII; else None."""
    if label.isascii():
        return None
    pattern = "".join(re.escape(ch) if ch.isascii() else ".?" for ch in label.strip())
    for name in [*known, *(k.capitalize() for k in LABELS)]:
        if re.fullmatch(pattern, name, re.IGNORECASE):
            return name
    return None


@dataclasses.dataclass(frozen=True)
class Element:
    """A labelled line or a table row: ``kind`` (a label of :data:`LABELS`, ``"case"`` or ``"row"``), ``label`` (the
    label as written, or the case id), ``fields`` (its parsed values, None where it does not match its form),
    ``text`` (as rendered), ``seen`` (a reader sees it where it earns: a labelled line in the note's own visible text,
    a row visible, a bare ``<details>`` fold allowed), ``disguised`` (the label or id it imitates with characters
    outside ASCII), ``cells``/``header`` for a row, ``canonical`` (a row of a table under :data:`HEADER`)."""

    kind: str
    label: str
    fields: dict | None
    text: str
    seen: bool
    disguised: str | None = None
    cells: tuple[str, ...] = ()
    header: tuple[str, ...] = ()
    canonical: bool = False


def _label_of(raw: str, ids: set[str]) -> tuple[str | None, str | None]:
    """``(kind, disguised)`` of a line's label: a known label, a case id, or a disguise of one."""
    label = raw.strip(" *`_")
    if label in ids:
        return "case", None
    if label.lower() in LABELS and label.isascii():
        return label.lower(), None
    imitated = disguised(label, ids)
    if imitated is None:
        return None, None
    return ("case" if imitated in ids else imitated.lower()), imitated


def _lines(b: Block, ids: set[str], seen: bool) -> list[Element]:
    out: list[list] = []
    for raw in b.text.splitlines():
        m = _LINE.match(raw.strip())
        kind, imitated = _label_of(m.group("label"), ids) if m else (None, None)
        if kind is not None:
            out.append([kind, m.group("label").strip(" *`_"), m.group("value").strip(" *`"), raw.strip(), imitated])
        elif out:  # a wrapped line continues its label's
            out[-1][2] = f"{out[-1][2]} {raw.strip()}"
            out[-1][3] = f"{out[-1][3]} {raw.strip()}"
    return [Element(kind, label, None if imitated else parse(kind, value), text, seen, imitated)
            for kind, label, value, text, imitated in out]


def _canonical(header: tuple[str, ...]) -> bool:
    names = tuple(_HEADER_ALT.get(" ".join(h.lower().split()), " ".join(h.lower().split())) for h in header[:5])
    return names == HEADER


def _row(b: Block, ids: set[str], seen: bool) -> Element | None:
    first = b.cells[0].strip(" *`") if b.cells else ""
    imitated = None if first in ids else disguised(first, ids)
    if first not in ids and imitated is None:
        return None
    return Element("row", first if imitated is None else imitated, None, " | ".join(b.cells), seen, imitated,
                   tuple(c.strip(" *`") for c in b.cells), tuple(" ".join(h.split()) for h in b.header),
                   _canonical(b.header))


def read(note: str, ids) -> list[Element]:
    """Every element of ``note``: those a reader sees where they earn (``seen``), then every other one in any of its
    text (raw HTML of any kind, struck, quoted, code, headings), which is held to the data but earns nothing."""
    ids = {str(c) for c in ids}
    seen: list[Element] = []
    for b in blocks(note):
        if b.kind == "prose" and not b.fold:
            seen += _lines(b, ids, True)
        elif b.kind == "row":
            seen += [e for e in [_row(b, ids, True)] if e]
    shown = {(e.kind, e.text) for e in seen}
    rest: list[Element] = []
    for b in every_block(note):
        found = _lines(b, ids, False) if b.kind == "prose" else [e for e in [_row(b, ids, False)] if e]
        for e in found:
            if (e.kind, e.text) not in shown:
                shown.add((e.kind, e.text))
                rest.append(e)
    return seen + rest


def prose(note: str, ids) -> list[str]:
    """The paragraphs and list items a reader sees that hold no element in its form: read by a person, not scored."""
    ids = {str(c) for c in ids}
    return [b.text for b in blocks(note) if b.kind == "prose"
            and not any(e.fields is not None for e in _lines(b, ids, True))]
