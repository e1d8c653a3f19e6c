"""Exercise 07: the pieces of a PR note a program reads reliably, shared by the labelled lines, the table rows and the
two rules that still read prose.

* a **figure** is a number with a unit (``us``, ``µs``, ``ms``, ``x``, ``×``, ``%``), or a number paired with one
  (``9.0 vs 9.8 us``); after a bound or an approximation (``under 10 %``, ``about 9 us``) it is none; it must be one of
  the case's :func:`figures` within one unit of the last digit written (:func:`is_figure`);
* an **outcome** word (:data:`OUTCOME_WORDS`) in a table cell or a denial of the losses is read where it is asserted
  (:func:`~fastpath_lib.grading.rules.assertion.asserted`): a table cell ``win (1.34x)`` marks a win;
* the scope's column limits and dtypes; a speed-up claimed (:func:`claims_speedup`, the CPU rule).

Prose outcomes, counts and figures are not read: a note's prose is for a person (the check's ``PROSE_NOTE``).

>>> [round(f, 2) for f in figures({"baseline_median_us": 40.0, "candidate_median_us": 47.0,
...                                 "baseline_spread_us": 0.4, "candidate_spread_us": 0.5})][:5]
[40.0, 47.0, 0.4, 0.5, 7.0]
>>> [(v, d) for v, d, _ in figures_in("from 40 to 47 us (1.18x, +17.5 %), shape 2048 x 2048")]
[(40.0, 0), (47.0, 0), (1.18, 2), (17.5, 1)]
>>> outcome_of("win (1.34x)"), outcome_of("not slower"), outcome_of("1% faster, within noise")
('win', None, 'neutral')
>>> [v for v, _, _ in figures_in("c05 loses under 10 %, about 0.8 us, < 1 %; c10 (1,250.5 -> 1,240 us)")]
[1250.5, 1240.0]
>>> column_limits("fp16 inputs of at most 16,384 columns; cols <= 8192 or the 4096-column limit; c11 has 32768 columns")
[16384, 8192, 4096]
"""

from __future__ import annotations

import re

from fastpath_lib.reading import words_outside_details
from fastpath_lib.grading.rules.rendered import (all_table_rows, scope_text, sections, statements, table_rows,
                                                 visible_text)
from fastpath_lib.grading.rules.assertion import asserted
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, WIN

__all__ = ["statements", "figures", "figures_in", "is_figure", "outcome_of", "id_pattern",
           "column_limits", "dtypes_named", "case_dtype", "case_shape", "OUTCOME_WORDS", "sections",
           "words_outside_details", "table_rows", "route_cell", "scope_text", "claims_speedup", "all_table_rows",
           "visible_text"]

#: outcome -> the words that claim it (neutral words decide a sentence or part: "1% faster, within the noise" is
#: neutral).
OUTCOME_WORDS = {
    NEUTRAL: r"\bneutral\b|\b(within|inside|in|under|below) (the |its |their )?(\w+ )?(noise|spread|variance|jitter)\b|"
             r"\bnoise( band)? (swallows|covers|hides|dominates|exceeds|is (wider|larger|bigger|greater) than)\b|"
             r"\bno ([a-z]+ ){0,2}(difference|change)\b|\b(not |in)significant\b|\bon par\b|\bunchanged\b|"
             r"\bindistinguishable\b|\bti(e|es|ed)\b",
    WIN: r"\bwins?\b|\bwon\b|\bwinning\b|\bfaster\b|\bquicker\b|\bspeed-?ups?\b|\bspeeds? up\b|\bbeat(s|ing)?\b|"
         r"\boutperform\w*|\bimprov(e|es|ed|ing|ements?)\b|\bgain(s|ed)?\b|\bbetter\b|\bahead\b",
    LOSS: r"\bloss(es)?\b|\blos(e|es|ing|t)\b|\bslower\b|\bregress\w*|\bslow-?downs?\b|\bworse\b|\bworsen\w*|"
          r"\bunderperform\w*|\btrail(s|ed|ing)?\b|\blag(s|ged|ging)?\b|\bbehind\b|\bdegrad\w*",
    FALLBACK: r"\bfall(s|ing)?[ -]?back\b|\bfell back\b|\bfallbacks?\b",
}
#: A bound or an approximation before a number: the number is no figure ("under 10 %", "about 9 us", "above 16384").
_BOUNDED = re.compile(r"(\b(less|more|fewer|greater|larger|smaller|wider|narrower) than|\b(under|over|below|above|"
                      r"beyond|within|nearly|almost|about|around|roughly|approximately|up to)|\bat (most|least)|"
                      r"[~≈≤≥]|(?<![-=])[<>]=?)\s*$", re.IGNORECASE)
_NUM = r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
#: A unit that makes a number a figure: a time, a ratio (not a shape's "x": ``4096 x 4096``), a percentage.
_UNIT = r"(?:us|µs|μs|usec|microseconds?|ms|milliseconds?|%|percent|[x×](?!\s*\d))(?!\w)"
_PAIR = r"(?:vs\.?|versus|→|->|=>|to|/|and|or|±|\+/-)"
_FIGURE = re.compile(rf"(?<![\w.])({_NUM})(?:\s*({_UNIT})|\s*{_PAIR}\s*(?={_NUM}\s*{_UNIT}))", re.IGNORECASE)
_BOUND = (r"(?:at most|up to|no more than|not more than|<=|≤|<|max(?:imum)?(?: of)?|limit(?: of)?|wider than|more than|"
          r"over|beyond|above|exceed(?:s|ing)?|larger than|greater than|within|under|below|fewer than|less than)")
_INT = r"(\d{1,3}(?:,\d{3})+|\d+)(?![\w.,]\d)"
#: A column limit: a bound and a number of columns (``at most 16384 columns``, ``cols <= 16384``, ``the 16384-column
#: limit``); a case's width (``32768 columns``) has no bound and is none.
_LIMITS = (re.compile(rf"{_BOUND}\s+(?:\w+\s+)?{_INT}\s*-?\s*(?:columns?|cols?|elements?)\b", re.IGNORECASE),
           re.compile(rf"\b(?:columns?|cols|width|hidden size|last dim\w*)\s*(?:of\s+)?{_BOUND}\s*{_INT}",
                      re.IGNORECASE),
           re.compile(rf"(?<![\w.]){_INT}[- ]columns? (?:limit|cap|bound|maximum)\b", re.IGNORECASE))
_DTYPES = {"float16": r"\bfp16\b|\bfloat16\b|\bhalf\b", "bfloat16": r"\bbf16\b|\bbfloat16\b",
           "float32": r"\bfp32\b|\bfloat32\b|\bsingle\b"}


#: The noun ``fallback`` as a thing, not a case's class: the route a case is compared with or that runs it ("slower
#: than the fallback", "loses to its fallback", "F.rms_norm, the fallback"); "fallback cases", "c10: fallback" and
#: "falls back" name the class.
_ROUTE = re.compile(r"\b(the|its|their|than|against|vs\.?|versus)\s+fallbacks?\b(?!\s+cases?\b)", re.IGNORECASE)


def _words(text: str, outcome: str, a: int = 0, b: int | None = None) -> list[re.Match]:
    """The words of ``outcome`` in ``text[a:b]``, less the fallback named as a route (:data:`_ROUTE`)."""
    b = len(text) if b is None else b
    route = {m.end() for m in _ROUTE.finditer(text)}
    return [m for m in re.finditer(OUTCOME_WORDS[outcome], text[:b], re.IGNORECASE)
            if m.start() >= a and m.end() not in route]


def _claimed(text: str, outcome: str, a: int = 0, b: int | None = None) -> bool:
    """Whether ``text[a:b]`` (a sentence or a part of one, read in its sentence) asserts a word of ``outcome``
    (:func:`asserted`; "no clear difference" is neutral: its own "no" is part of the words)."""
    return any(asserted(text, m.start()) for m in _words(text, outcome, a, b))


def outcome_of(clause: str, a: int = 0, b: int | None = None) -> str | None:
    """The outcome ``clause`` (or its part ``[a:b]``, read in the whole) claims for the cases it names: neutral if it
    says so, else the one outcome its words name (none where they name two, or none)."""
    if _claimed(clause, NEUTRAL, a, b):
        return NEUTRAL
    named = [k for k in (WIN, LOSS, FALLBACK) if _claimed(clause, k, a, b)]
    return named[0] if len(named) == 1 else None


def id_pattern(ids) -> re.Pattern:
    alternatives = "|".join(re.escape(str(c)) for c in sorted(ids, key=lambda c: -len(str(c))))
    return re.compile(rf"(?<![\w])({alternatives})(?![\w])")


def figures_in(text: str) -> list[tuple[float, int, str]]:
    """``(value, decimals written, text)`` of each figure in ``text`` (sign dropped)."""
    out = []
    for m in _FIGURE.finditer(text):
        if _BOUNDED.search(text[:m.start()]):
            continue
        raw = m.group(1).replace("−", "-").replace(",", "")
        out.append((abs(float(raw)), len(raw.split(".")[1]) if "." in raw else 0, m.group(0).strip()))
    return out


def figures(row, extra=()) -> list[float]:
    """A case's figures: its medians and spreads and the difference of its medians (in µs and in ms), their ratio
    either way, each ratio's distance from 1 and each spread over its median (as fractions and in percent), and
    ``extra`` (numbers of the method that may be given beside a case, such as the warm-up)."""
    b, c = float(row["baseline_median_us"]), float(row["candidate_median_us"])
    bs, cs = float(row["baseline_spread_us"]), float(row["candidate_spread_us"])
    times = [b, c, bs, cs, abs(b - c)]
    rel = []
    if b > 0 and c > 0:
        rel = [c / b, b / c, abs(c / b - 1), abs(b / c - 1), bs / b, cs / c]
    return times + [t / 1000 for t in times] + rel + [100 * r for r in rel] + [float(x) for x in extra]


def is_figure(value: float, decimals: int, values) -> bool:
    """Whether ``value``, written with ``decimals`` decimals, is one of ``values`` to within one unit of its last
    digit (rounded or cut)."""
    return any(abs(value - v) <= 10.0 ** -decimals + 1e-9 for v in values if v == v)


def column_limits(text: str) -> list[int]:
    """Each column limit ``text`` states, in the order written."""
    found = sorted((m.start(), int(m.group(1).replace(",", ""))) for p in _LIMITS for m in p.finditer(text))
    return [n for _, n in found]


def dtypes_named(text: str) -> set[str]:
    """The dtypes (``float16``, ``bfloat16``, ``float32``) that ``text`` names, by any of their usual names."""
    return {d for d, p in _DTYPES.items() if re.search(p, text, re.IGNORECASE)}


def case_dtype(case_id: str) -> str | None:
    """The dtype a case id names (``c03_1024x8192_fp32``: ``float32``), if any."""
    words = " ".join(re.split(r"[_\W]+", case_id))
    return next((d for d, p in _DTYPES.items() if re.search(p, words, re.IGNORECASE)), None)


def case_shape(case_id: str) -> tuple[int, int] | None:
    """``(rows, columns)`` of a case id's shape (``c03_1024x8192_fp32``: ``(1024, 8192)``), if it has one."""
    m = re.search(r"(\d+)x(\d+)", case_id)
    return (int(m.group(1)), int(m.group(2))) if m else None


def route_cell(cells: list[str], header: list[str]) -> int | None:
    """The index of the row's route: the cell under a "route" header, else the first cell naming one."""
    if "route" in header and header.index("route") < len(cells):
        return header.index("route")
    return next((i for i, c in enumerate(cells) if c.lower() in ("triton", "fallback")), None)


#: A speed-up claim: a multiplier ("1.4x", "2 ×"; a shape such as "4096 x 4096" is not one), or its words.
_SPEEDUP = re.compile(r"(?<![x×]\s)(?<![x×])\b\d+(\.\d+)?\s*(x|×)(?!\w|\s*\d)|\bfaster\b|\bquicker\b|"
                      r"\bspeed-?ups?\b|\bspeeds? up\b|\baccelerat\w*", re.IGNORECASE)
#: Words that make a sentence about a speed-up something other than a claim: a negation, or a condition (whether a
#: GPU run shows one is a question, not a claim).
_UNCLAIMED = re.compile(r"\b(no|not|never|without|none|nothing|unmeasured|cannot|whether|if|unless|until)\b|n't\b",
                       re.IGNORECASE)


def claims_speedup(sentence: str) -> bool:
    """Whether a sentence claims a speed-up: a multiplier or a speed word it asserts (:func:`asserted`: no question, no
    modal, no infinitive hoped for), in a sentence neither negated nor conditional. A shape is not a multiplier.

    >>> [claims_speedup(s) for s in ("The kernel is 1.4x faster.", "A 4096 x 4096 input took 9 s.",
    ...                              "No speed-up is claimed.", "Whether it is faster needs a GPU run.",
    ...                              "It was expected to be faster.", "Is it faster?",
    ...                              "A GPU run may show a speed-up.")]
    [True, False, False, False, False, False, False]
    """
    return any(asserted(sentence, m.start()) for m in _SPEEDUP.finditer(sentence)) and not _UNCLAIMED.search(sentence)
