"""A Markdown note as a reader sees it rendered (exercise 07): its blocks read from ``markdown_it``'s token stream.

What renders nothing a reader sees counts for nothing: an HTML comment, on one line or many, in a paragraph or as a
block (its headings, sentences and table rows included), struck-through text (``~~...~~``), a ``<script>`` or
``<style>`` element, and HTML tags themselves (their text is read). Headings, paragraphs, list items and table rows
are read as Markdown parses them, never as lines that look like them.

>>> [b.kind for b in blocks("## S\\nc01 wins.\\n<!--\\n## H\\n| c01 | loss |\\n-->\\n| c | k |\\n|-|-|\\n| c01 | 1 |")]
['heading', 'prose', 'row']
>>> statements("Shown. <!-- hidden.\\nStill hidden. --> Shown ~~not~~ too.\\nnot a measurement\\nThe kernel wins.")
['Shown.', 'Shown too.', 'not a measurement', 'The kernel wins.']
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata

__all__ = ["Block", "blocks", "every_block", "statements", "sections", "table_rows", "all_table_rows", "visible_text",
           "scope_text", "canon"]

#: Latin letters' Cyrillic and Greek lookalikes (a reader sees ``с05`` as ``c05``).
_LOOKALIKE = str.maketrans("аАсСеЕоОрРхХуКМТНВіІјЈѕЅԁοΟαΑνΝκΚρΡτΤιΙΕΒΜΖΗΧΥ",
                           "aAcCeEoOpPxXyKMTHBiIjJsSdoOaAvNkKpPtTiIEBMZHXY")
#: Elements whose text a reader sees or opens: a bare fold (``<details>``, ``<details open>``) and its bare summary;
#: the same element with any other attribute (``hidden``, ``style``, ``class``) hides what it holds.
_SHOWN = {"details", "summary"}
_VOID = {"br", "hr", "wbr", "img", "input", "meta", "link", "source", "col", "area", "base", "embed", "param", "track"}
_ELEMENT = re.compile(r"<(/?)([A-Za-z][\w-]*)([^>]*?)(/?)>")


def canon(text: str) -> str:
    """``text`` as a reader reads it: format characters (zero-width spaces, Unicode category Cf) removed, NFKC
    normalized, Cyrillic and Greek lookalikes of Latin letters read as those letters."""
    return unicodedata.normalize("NFKC", "".join(c for c in text if unicodedata.category(c) != "Cf")).translate(
        _LOOKALIKE)


def _bare(m: re.Match) -> bool:
    """Whether an element's tag is a bare fold or summary (:data:`_SHOWN`; ``open`` allowed on a fold)."""
    name, attrs = m.group(2).lower(), " ".join(m.group(3).split()).lower()
    return name in _SHOWN and (attrs == "" or name == "details" and attrs in ("open", 'open=""', "open=open"))


def _depth(html: str, depth: tuple) -> tuple:
    """The raw HTML elements open after ``html`` (a stack of ``(name, hides)``: an element hides what it holds unless
    it is a bare fold or summary, :func:`_bare`)."""
    for m in _ELEMENT.finditer(_HIDDEN_HTML.sub(" ", html)):
        name = m.group(2).lower()
        if name in _VOID or m.group(4):
            continue
        if m.group(1):
            depth = depth[:-1]
        else:
            depth = (*depth, (name, not _bare(m)))
    return depth


def _hides(depth: tuple) -> bool:
    return any(h for _, h in depth)


def _folded(depth: tuple) -> bool:
    return any(n == "details" for n, _ in depth)


def _plain_html(html: str) -> bool:
    """Whether raw HTML has only elements a reader sees as the note's own text (:func:`_bare`, line breaks)."""
    return all(_bare(m) or m.group(2).lower() in _VOID for m in _ELEMENT.finditer(_HIDDEN_HTML.sub(" ", html)))

#: What of raw HTML renders nothing: comments (an unclosed one hides the rest), script and style elements, tags.
_HIDDEN_HTML = re.compile(r"<!--.*?(-->|$)|<(script|style)\b.*?(</\2\s*>|$)", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z][^>]*>")


@dataclasses.dataclass(frozen=True)
class Block:
    """A block of the rendered note: a ``heading`` (``level``, ``text``), ``prose`` (a paragraph or a list item's
    paragraph; ``text`` keeps its line breaks) or a table ``row`` (``cells``, ``header``: its table's header cells,
    lower case); ``line`` is where it starts in the source."""

    kind: str
    text: str
    line: int
    level: int = 0
    cells: tuple[str, ...] = ()
    header: tuple[str, ...] = ()
    fold: bool = False


def _inline(token, checked: bool = False) -> str:
    """The text an inline token renders as the note's own plain statement: its text and code, line breaks as
    ``\\n``; no HTML, no struck text, nothing inside an inline HTML element. ``checked``: every word of it."""
    out, struck, depth = [], 0, ()
    for c in token.children or ():
        if c.type == "html_inline":
            depth = _depth(c.content, depth)
        if c.type == "s_open":
            struck += 1
        elif c.type == "s_close":
            struck -= 1
        elif (struck or _hides(depth) or c.type == "html_inline" and not _plain_html(c.content)) and not checked:
            continue
        elif c.type in ("text", "code_inline"):
            out.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif c.type == "html_inline" and not c.content.startswith("<!--"):
            out.append(" ")
    return "".join(out)


def _raw_lines(text: str, line: int, fold: bool = False) -> list[Block]:
    """What a raw HTML or code block shows: its visible text, a line starting with ``|`` read as a table row."""
    out, para, header = [], [], None
    for i, raw in enumerate(_TAG.sub(" ", _HIDDEN_HTML.sub(" ", text)).splitlines()):
        s = raw.strip()
        if s.startswith("|"):
            cells = tuple(c.strip().strip("`*").strip() for c in s.strip("|").split("|"))
            if header is None:
                header = tuple(c.lower() for c in cells)
            elif not all(set(c) <= set("-: ") for c in cells):
                out.append(Block("row", " | ".join(cells), line + i, cells=cells, header=header, fold=fold))
            continue
        header = None
        if s:
            para.append(s)
        if para and (not s or i == len(text.splitlines()) - 1):
            out.append(Block("prose", "\n".join(para), line + i, fold=fold))
            para = []
    if para:
        out.append(Block("prose", "\n".join(para), line, fold=fold))
    return out


@functools.lru_cache(maxsize=1)
def _parser():
    """CommonMark with GitHub's tables and strikethrough (imported here: only exercise 07's reading needs it, and a
    bare GPU machine has no markdown-it-py)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


@functools.lru_cache(maxsize=128)
def _blocks(note: str, checked: bool = False, raw: bool = False) -> tuple[Block, ...]:
    """The note's blocks as its own plain statements; ``checked``: every block a reader might see or not (raw HTML's
    and its elements' text, struck text, headings as prose too, block quotes, code), read by :func:`canon`."""
    tokens, out, i = _parser().parse(note), [], 0
    header: tuple[str, ...] = ()
    row: list[str] | None = None
    depth, quoted = (), 0  # open raw HTML elements, block quotes
    while i < len(tokens):
        t = tokens[i]
        line = t.map[0] if t.map else (out[-1].line if out else 0)
        aside = bool(_hides(depth) or quoted) and not checked
        fold = _folded(depth)
        if t.type == "blockquote_open":
            quoted += 1
        elif t.type == "blockquote_close":
            quoted -= 1
        elif t.type == "heading_open":
            text = _inline(tokens[i + 1], checked).strip()
            if not aside:
                out.append(Block("heading", text, line, level=int(t.tag[1])))
            if checked and text:
                out.append(Block("prose", text, line))
            i += 2
        elif t.type == "paragraph_open":
            text = _inline(tokens[i + 1], checked).strip()
            if text and not aside:
                out.append(Block("prose", text, line, fold=fold))
            i += 2
        elif t.type == "thead_open":
            header = ()
        elif t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(" ".join(_inline(t, checked).split()).strip("`*").strip())
        elif t.type == "tr_close" and row is not None:
            if not header:
                header = tuple(c.lower() for c in row)
            elif not aside:
                out.append(Block("row", " | ".join(row), line, cells=tuple(row), header=header, fold=fold))
            row = None
        elif t.type == "html_block":
            if checked or not aside and _plain_html(t.content):
                out += _raw_lines(t.content, line, fold or "<details" in t.content.lower())
            depth = _depth(t.content, depth)
        elif t.type in ("fence", "code_block") and checked:
            out += _raw_lines(t.content, line)
        i += 1
    if checked and not raw:
        return tuple(dataclasses.replace(b, text=canon(b.text), cells=tuple(canon(c) for c in b.cells)) for b in out)
    return tuple(out)


def every_block(note: str) -> list[Block]:
    """Every block of the note, a reader might see it or not, as written (not :func:`canon` read)."""
    return list(_blocks(note, True, True))


def blocks(note: str, *, checked: bool = False) -> list[Block]:
    """The rendered note's blocks, in order (:class:`Block`); ``checked``: every block a reader might see or not."""
    return list(_blocks(note, checked))


def _sentences(text: str) -> list[str]:
    """A prose block's sentences: joined over its line breaks, a line that ends with no mark before a line that
    starts with a capital ending a sentence (a reader reads ``not a measurement`` / ``The kernel wins`` as two)."""
    out = []
    for run in re.split(r"(?<=[\w%)\]`*])[ \t]*\n[ \t]*(?=[A-Z])", text):
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(run.split())) if s.strip()]
    return out


def statements(note: str, *, checked: bool = False) -> list[str]:
    """The note's prose as rendered, sentence by sentence: paragraphs and list items (each read whole over the lines it
    wraps onto); no heading, no table row, nothing a comment hides, and (unless ``checked``: what is checked against
    the data) nothing a reader might not see as the note's own plain statement (:func:`_blocks`)."""
    return [s for b in _blocks(note, checked) if b.kind == "prose" for s in _sentences(b.text)]


def visible_text(note: str, *, checked: bool = False, raw: bool = False) -> str:
    """Everything the rendered note shows as its own plain statements, one block a line (headings, prose, table rows),
    spacing normalized; ``checked``: all its text (:func:`_blocks`), ``raw``: as written (not :func:`canon` read)."""
    return "\n".join(" ".join(b.text.split()) for b in _blocks(note, checked, raw))


def sections(note: str, *, nested: bool = True) -> dict[str, str]:
    r"""Heading (lower case) -> the source text under it, up to the next heading of the same or a higher level (its
    subsections are part of it, as in Markdown's outline); with ``nested=False``, up to the next heading of any level.
    Only headings that render count (a ``## ...`` line in a comment or a code block is none).

    >>> sections("## Performance\nTimed.\n### Per-case table\n| c01 |\n## Method\nMedians.")["performance"]
    'Timed.\n### Per-case table\n| c01 |'
    >>> sections("## Performance\nTimed.\n### Per-case table\n| c01 |", nested=False)["performance"]
    'Timed.'
    >>> list(sections("## Summary\nx\n<!--\n## Performance\n-->"))
    ['summary']
    """
    lines = note.splitlines()
    heads = [(b.line, b.level, b.text.lower()) for b in _blocks(note) if b.kind == "heading"]
    out = {}
    for k, (i, level, head) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level or not nested), len(lines))
        out[head] = "\n".join(lines[i + 1:end])
    return out


def all_table_rows(note: str, *, checked: bool = False) -> list[tuple[list[str], list[str]]]:
    """Every rendered table row (not a header), anywhere in the note: ``(cells, header)`` (``checked``: in raw HTML
    and block quotes too, :func:`canon` read)."""
    return [(list(b.cells), list(b.header)) for b in _blocks(note, checked) if b.kind == "row"]


def table_rows(note: str) -> dict[str, tuple[list[str], list[str]]]:
    """Rendered table rows keyed by their first cell (the first row of each key): ``(cells, header)``."""
    out: dict = {}
    for cells, header in all_table_rows(note):
        if cells:
            out.setdefault(cells[0], (cells, header))
    return out


_LABEL = re.compile(r"^\W*scope\W*:?\**\s*(.*)$", re.IGNORECASE | re.DOTALL)
#: Where a labelled statement ends inside its paragraph: a line that opens another ``Label:``.
_NEXT_LABEL = re.compile(r"\n\s*\**[A-Z][\w /-]{0,30}\**:")


def scope_text(note: str, found: dict[str, str]) -> str:
    """The scope sections' text, and each ``Scope:`` paragraph read whole, over the lines it wraps onto, up to the next
    ``Label:`` line."""
    text = "\n\n".join(visible_text(body) for head, body in found.items() if "scope" in head)
    for b in _blocks(note):
        m = _LABEL.match(b.text) if b.kind == "prose" else None
        if m:
            text += "\n\n" + " ".join(_NEXT_LABEL.split(m.group(1))[0].split())
    return text
