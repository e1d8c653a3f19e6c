"""Exercise 07: every table row of a note is a claim, wherever it stands.

A rendered row (:func:`~fastpath_lib.grading.rules.rendered.all_table_rows`) names its case in its first cell and
claims: its route (the cell under a ``route`` header, else the first cell that is ``triton`` or ``fallback``), its
class (the cell under a ``class``, ``outcome`` or ``verdict`` header, else the first cell that opens with a class
name; the cell's first word: ``win (1.34x)`` is a win) and its figures (a number with a unit, or a bare number:
``9.8 us``, ``+8.9 %``, ``9.8``). A row that contradicts the data is an inconsistency wherever it stands (a second table
in the summary, a table folded in ``<details>``); the performance table, besides, must list every case once with its
route and class. No other cell is read for an outcome.

>>> row_claims(["c05", "triton", "1.50x faster", "win (1.34x)"], ["case", "route", "speed", "class"])
('triton', ['win'])
>>> row_claims(["c05", "triton", "9.8", "losses"], ["case", "route", "us", "x"])
('triton', ['loss'])
>>> [v for c in ["c05", "1.50x faster", "9.8 us", "+8.9"] for v, _, _ in cell_figures(c)]
[1.5, 9.8, 8.9]
"""

from __future__ import annotations

import re

from fastpath_lib.grading.rules.rendered import canon, visible_text
from fastpath_lib.grading.rules.ex07_claims import (
    all_table_rows,
    figures_in,
    id_pattern,
    is_figure,
    route_cell,
    sections,
    table_rows,
)
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, WIN

__all__ = ["named", "row_claims", "row_problems", "performance_problems", "cell_figures", "disguised_ids"]

_BARE = re.compile(r"([-+−]?\d+(?:\.(\d+))?)\s*(?:us|µs|μs|ms|x|×|%)?", re.IGNORECASE)


def cell_figures(cell: str) -> list[tuple[float, int, str]]:
    """The figures a cell gives: each number with a unit (:func:`figures_in`), or the cell as a bare number."""
    found = figures_in(cell)
    m = _BARE.fullmatch(cell.strip())
    if not found and m:
        found = [(abs(float(m.group(1).replace("−", "-"))), len(m.group(2) or ""), cell.strip())]
    return found


#: A class name as a cell opens with it, plural or not.
_CLASSES = {WIN: WIN, WIN + "s": WIN, NEUTRAL: NEUTRAL, LOSS: LOSS, LOSS + "es": LOSS, FALLBACK: FALLBACK}
_CLASS_HEADERS = ("class", "outcome", "verdict")


def _first_word(cell: str) -> str | None:
    m = re.match(r"\W*([A-Za-z]+)", cell)
    return _CLASSES.get(m.group(1).lower()) if m else None


def row_claims(cells: list[str], header: list[str]) -> tuple[str | None, list[str]]:
    """What a row claims: its route (or None) and its class (``[class]``, or ``[]`` where no cell gives one)."""
    at = route_cell(cells, header)
    route = cells[at].lower() if at is not None else None
    col = next((i for i, h in enumerate(header) if h in _CLASS_HEADERS and i < len(cells)), None)
    if col is None:
        col = next((i for i, c in enumerate(cells) if i not in (0, at) and _first_word(c)), None)
    k = _first_word(cells[col]) if col is not None else None
    return route, [k] if k else []


def named(cells: list[str], ids) -> str | None:
    """The one case a row names (its first cell, else the one case id in its cells)."""
    if cells and cells[0] in ids:
        return cells[0]
    found = {m.group(1) for c in cells for m in id_pattern(ids).finditer(c)}
    return found.pop() if len(found) == 1 else None


def row_problems(which: str, note: str, rows: dict, known, *, outcomes: dict | None = None,
                 routes: dict | None = None) -> list[str]:
    """Every rendered row that names a case of ``rows``, against the data: each figure one of ``known(case)``, and
    where ``outcomes`` and ``routes`` are given (GPU data), its route and its class."""
    out = []
    for cells, header in all_table_rows(note, checked=True):
        cid = named(cells, rows)
        if cid is None:
            continue
        shown = " | ".join(cells)
        for cell in cells[1:]:
            out += [f"{which}, {cid}: its table row gives {raw!r}, none of its figures (the row: {shown})"
                    for v, d, raw in cell_figures(cell) if not is_figure(v, d, known(cid))]
        if outcomes is None or routes is None:
            continue
        route, claimed = row_claims(cells, header)
        if route is not None and route != routes[cid]:
            out.append(f"{which}, {cid}: a table row ({shown}) gives route {route}, the data {routes[cid]}")
        if claimed and claimed != [outcomes[cid]]:
            out.append(f"{which}, {cid}: a table row ({shown}) says {claimed}, the data says {outcomes[cid]}")
    return list(dict.fromkeys(out))


def disguised_ids(which: str, note: str, ids) -> list[str]:
    r"""Each word of the note (any of its text, seen or not) that reads as a case id of ``ids`` once its format
    characters are dropped and its lookalike letters read as Latin (:func:`~.rendered.canon`) but is written otherwise.

    >>> note = "| case | k |\n|-|-|\n| c05\u200b_1 | win |\n| \u044105_1 | win |\n\nc05_1 is slower."
    >>> len(disguised_ids("a", note, ["c05_1"]))
    2
    """
    pattern, out = id_pattern(ids), []
    for word in re.findall(r"[^\s|`*]+", visible_text(note, checked=True, raw=True)):
        for m in pattern.finditer(canon(word)):
            if m.group(1) not in word:
                out.append(f"{which}: the note writes case id {m.group(1)} with hidden or lookalike characters "
                           f"({ascii(word)[1:-1]})")
    return list(dict.fromkeys(out))


def performance_problems(which: str, note: str, outcomes: dict, routes: dict, heading: str) -> list[str]:
    """The performance table: a row for each case (under the heading matching ``heading``, else anywhere) with its
    route and its class."""
    perf = "\n".join(b for h, b in sections(note).items() if re.search(heading, h))
    found, out = {**table_rows(note), **table_rows(perf)}, []
    for cid, cls in outcomes.items():
        if cid not in found:
            out.append(f"{which}, {cid}: not in the performance table")
            continue
        route, claimed = row_claims(*found[cid])
        if route != routes[cid]:
            out.append(f"{which}, {cid}: the row gives route {route or 'none'}, the data {routes[cid]}")
        if claimed != [cls]:
            out.append(f"{which}, {cid}: the table says {claimed or 'no class'}, the data says {cls}")
    return out

