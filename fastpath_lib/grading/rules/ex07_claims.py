"""Exercise 07: what a PR note asserts, read so that each assertion can be held against the table it was written from.

A note is read as it renders (:mod:`~fastpath_lib.grading.rules.rendered`: nothing in an HTML comment counts), as
**statements**: its paragraphs and list items (each joined over the lines it wraps onto; headings and table rows are
not prose, and every table row is a claim of its own: :mod:`~fastpath_lib.grading.rules.ex07_tables`), split into
sentences. In a sentence

* a **case** is named by its case id; the text from the id to the next case id, ``;`` or the sentence's end is what
  the sentence says about that case (its segment);
* a **figure** is a number with a unit (``us``, ``µs``, ``ms``, ``x``, ``×``, ``%``), or a number paired with one
  (``9.0 vs 9.8 us``); in a case's segment it is that case's, and must be one of :func:`figures` within one unit of
  the last digit written (:func:`is_figure`);
* an **outcome** is claimed for the cases the sentence names by the words it asserts (:data:`OUTCOME_WORDS`, a
  comparison included: "beats", "got worse"; :func:`~fastpath_lib.grading.rules.assertion.asserted`: "not slower",
  "it is a myth that ... slower", "was expected to be faster", "failed to win", "would be faster", "perhaps faster" and
  "faster?" assert none; the fallback named as a route, "slower than the fallback", is none): a
  neutral word decides; else words of one outcome only; a sentence that names two outcomes is read in :func:`parts`;
* a **count** is a number bound to an outcome word, before it ("4 wins", "3 faster cases", "3 cases are faster") or
  after it ("wins on 4 cases", "wins 3 cases", "within the noise on 4"), "no wins" a count of none, each where its
  outcome word is asserted; a number bound to another noun ("two fallback runs", "faster on 2 rows") counts no cases
  (:func:`counts_in`).

Counting words, case ids or keywords proves nothing here: a sentence earns something only through what it asserts
about a case or a figure, and every assertion is checked.

>>> [round(f, 2) for f in figures({"baseline_median_us": 40.0, "candidate_median_us": 47.0,
...                                 "baseline_spread_us": 0.4, "candidate_spread_us": 0.5})][:5]
[40.0, 47.0, 0.4, 0.5, 7.0]
>>> [(v, d) for v, d, _ in figures_in("from 40 to 47 us (1.18x, +17.5 %), shape 2048 x 2048")]
[(40.0, 0), (47.0, 0), (1.18, 2), (17.5, 1)]
>>> outcome_of("c05 is slower (9.8 vs 9.0 us), outside the noise band"), outcome_of("c03: 1% faster, within noise")
('loss', 'neutral')
>>> outcome_of("c01 is faster and c12 is slower"), outcome_of("c09 is not slower")
(None, None)
>>> outcome_of("c07 looks faster, but its noise band is wider than that")
'neutral'
>>> outcome_of("c12 is slower, well beyond its noise")
'loss'
>>> outcome_of("c05 is slower by 9 % with 2 % noise"), outcome_of("c05 is not within the noise: 9 % slower")
('loss', 'loss')
>>> [v for v, _, _ in figures_in("c05 loses under 10 %, about 0.8 us, < 1 %; c10 (1,250.5 -> 1,240 us)")]
[1250.5, 1240.0]
>>> count_claims("4 wins, 3 neutral cases and two losses; 16384 columns fall back; rows above 16384 fall back")
[('win', 4), ('neutral', 3), ('loss', 2)]
>>> count_claims("It wins on 3 cases, ties on 4 and loses on 2; it loses on 1000 x 128 and on 4096-column rows")
[('win', 3), ('neutral', 4), ('loss', 2)]
>>> column_limits("fp16 inputs of at most 16,384 columns; cols <= 8192 or the 4096-column limit; c11 has 32768 columns")
[16384, 8192, 4096]
"""

from __future__ import annotations

import dataclasses
import re

from fastpath_lib.reading import words_outside_details
from fastpath_lib.grading.rules.rendered import (all_table_rows, scope_text, sections, statements, table_rows,
                                                 visible_text)
from fastpath_lib.grading.rules.assertion import asserted, stance
from fastpath_lib.grading.vocabulary import FALLBACK, LOSS, NEUTRAL, WIN

__all__ = ["Mention", "statements", "parts", "mentions", "figures", "figures_in", "is_figure", "outcome_of",
           "count_claims", "counts_in", "Count", "id_pattern", "column_limits", "dtypes_named", "case_dtype",
           "case_shape", "OUTCOME_WORDS", "stated", "method_facts", "sections", "words_outside_details", "table_rows",
           "route_cell", "scope_text", "claims_speedup", "all_table_rows", "visible_text"]

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
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
_SAMPLES = r"(?:samples?|runs?|timings?|times|repetitions|reps|measurements|iterations|trials|calls)"
#: What a number may count besides cases: what the harness counts (:data:`_SAMPLES`), a unit, a part of a shape.
_OTHER_NOUN = rf"(?:{_SAMPLES}|{_UNIT}|rows?|columns?|cols?|elements?|bytes?|dim\w*|launch\w*|kernels?|paths?|routes?)"
_N = rf"(?:\d+|{'|'.join(_NUMBER_WORDS)})(?![.,]\d)"
_OUTCOME = "|".join(f"(?P<{k}>{w})" for k, w in OUTCOME_WORDS.items())
#: A count, its number first: the number, what it counts of (``of the 9``, ``timed``, ``cases``, ``are``), the outcome
#: ("4 wins", "3 faster cases", "3 cases are faster", "4 of the cases are within the noise").
_COUNT_BEFORE = re.compile(
    rf"(?<![\w.])(?<![x×] )(?<![x×])(?P<n>{_N})\s+(?:of\s+(?:the\s+|them\s+|these\s+)?(?:\d+\s+)?)?"
    r"(?:(?:eligible|timed|measured|triton|other|remaining|more)\s+)?(?:cases?\s+)?(?:(?:are|were)\s+)?"
    rf"(?:{_OUTCOME})(?!\s+{_OTHER_NOUN}\b)", re.IGNORECASE)
#: A count, its outcome first: the outcome, a preposition or none, the number ("wins on 4 cases", "wins 3 cases",
#: "faster in 3 cases", "within the noise on 4", "falls back for 3").
_COUNT_AFTER = re.compile(
    rf"(?:{_OUTCOME})\s+(?:(?:on|in|for|across|among)\s+)?(?P<n>{_N})(?![\w-]|\s*(?:[x×%/-]|{_UNIT}))"
    rf"(?!\s+(?:\w+\s+)?{_OTHER_NOUN}\b)", re.IGNORECASE)
#: A count as a label: an outcome word opening the sentence, a colon, the number ("Wins: 12 of 12 cases").
_COUNT_LABEL = re.compile(rf"^\W*(?:{_OUTCOME})\s*:\s*(?P<n>{_N})(?![\w-]|\s*(?:[x×%/-]|{_UNIT}))", re.IGNORECASE)
#: A count of none: "no" before an outcome named as a thing ("no wins", "no regressions", "no slower cases"), the denial
#: unrestricted (the clause ends there, or says "at all"): "no regression elsewhere" or "no losses on fp32" restrict it
#: and count nothing; "no slower" (a comparison) is no count.
_NOUNS = r"wins?|loss(?:es)?|regressions?|slow-?downs?|speed-?ups?|ties|fall-?backs?"
_COUNT_NONE = re.compile(
    rf"(?<![\w.])no\s+(?:(?:eligible|timed|measured|triton|other|remaining|clear|real)\s+)?"
    rf"(?:{_OUTCOME})(?P<cases>\s+cases?)?(?:\s+(?:at all|whatsoever|anywhere))?"
    r"(?=\s*(?:[.;,:!)]|$|\band\b|\bor\b))", re.IGNORECASE)
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


def unaffirmed(clause: str, a: int = 0, b: int | None = None) -> dict[str, str]:
    """Outcome -> ``"denied"`` or ``"open"`` for each outcome ``clause[a:b]`` names without asserting it
    (:func:`~fastpath_lib.grading.rules.assertion.stance`: "it is a myth that c05 is slower" denies a loss, "c05 might
    be slower" leaves it open)."""
    out = {}
    for k in OUTCOME_WORDS:
        held = {stance(clause, m.start()) for m in _words(clause, k, a, b)}
        if held and "asserted" not in held:
            out[k] = "denied" if "denied" in held else "open"
    return out


#: Where a sentence that names two outcomes is read in parts: before a comma, ``;``, ``and``, ``but``, ``while`` or
#: ``whereas`` whose next words (past case ids, linking words and parentheses) are an outcome's, whatever the outcome
#: ("wins on c01, loses on c12"; "c01 wins, while c03 is within the noise"). A part that names no case qualifies the
#: one before (:func:`parts`: "1 % faster, within the noise" is one part).
_LINKING = r"the|a|an|it|its|and|but|while|whereas|is|are|was|were|stays?|remains?|looks?|seems?|runs?|gets?|#+"
_PART = re.compile(rf"(?:[,;]|\s+(?:and|but|while|whereas))\s+(?=(?:(?:{_LINKING}|\([^()]*\))\s+)*(?:"
                   + "|".join(OUTCOME_WORDS.values()) + "))", re.IGNORECASE)


def parts(clause: str) -> list[tuple[int, str]]:
    """``(start, text)`` of each part ``clause`` is read in (its case ids written as ``#``): cut before each outcome
    word that follows a comma or a conjunction; a part that names no outcome is read with the next, a part that names
    no case with the one before (it qualifies it: "faster, but neutral within its noise"), or the one after where it
    opens the sentence ("within the noise, ### is faster").

    >>> [p for _, p in parts("Wins on ### (1.5x), neutral on ### and ###")]
    ['Wins on ### (1.5x)', ', neutral on ### and ###']
    >>> [p for _, p in parts("### and ### win, while ### loses")]
    ['### and ### win', ', while ### loses']
    >>> [p for _, p in parts("### is slower and ### is neutral")]
    ['### is slower', ' and ### is neutral']
    >>> [p for _, p in parts("### is faster, but neutral within its noise")]
    ['### is faster, but neutral within its noise']
    >>> [p for _, p in parts("### wins (1.5x), while ### is within the noise")]
    ['### wins (1.5x)', ', while ### is within the noise']
    >>> [p for _, p in parts("Within the noise, ### is faster")]
    ['Within the noise, ### is faster']
    """
    cuts = [0, *(m.start() for m in _PART.finditer(clause)), len(clause)]
    pieces = [[a, b] for a, b in zip(cuts, cuts[1:]) if b > a]
    for i in range(len(pieces) - 2, -1, -1):  # a part that names no outcome is read with the next
        if not any(_claimed(clause, k, *pieces[i]) for k in OUTCOME_WORDS):
            start = pieces.pop(i)[0]
            pieces[i][0] = start
    for i in range(len(pieces) - 1, 0, -1):  # a part that names no case is read with the one before
        if "#" not in clause[pieces[i][0]:pieces[i][1]]:
            pieces[i - 1][1] = pieces.pop(i)[1]
    if len(pieces) > 1 and "#" not in clause[pieces[0][0]:pieces[0][1]]:  # or, opening the sentence, the one after
        pieces[1][0] = pieces[0][0]
        del pieces[0]
    return [(a, clause[a:b]) for a, b in pieces]


@dataclasses.dataclass(frozen=True)
class Mention:
    """A case named in a sentence: the sentence, what it says about the case (``segment``), the outcome it claims, the
    outcomes its part names without asserting them (outcome -> ``"denied"`` or ``"open"``, :func:`unaffirmed`) and
    every outcome its part asserts (two where it claims none: "c05 is slower; it is quicker than the baseline")."""

    case: str
    sentence: str
    segment: str
    outcome: str | None
    unasserted: dict = dataclasses.field(default_factory=dict)
    asserted: tuple = ()


def id_pattern(ids) -> re.Pattern:
    alternatives = "|".join(re.escape(str(c)) for c in sorted(ids, key=lambda c: -len(str(c))))
    return re.compile(rf"(?<![\w])({alternatives})(?![\w])")


#: What may join the case ids of a list ("c05 and c12", "c05, c12 and c13").
_JOINED = re.compile(r"^\s*(,|and|&|,\s*and)?\s*$", re.IGNORECASE)
_RESPECTIVELY = re.compile(r",?\s*respectively\b", re.IGNORECASE)


def _respective(sentence: str, found: list[re.Match]) -> dict[int, str]:
    """Match index -> its own figures, where a list of case ids takes its figures in order, ``respectively`` ("c05
    and c12 are slower (9 -> 9.8 us and 40 -> 47 us, respectively)"): the text between the list and ``respectively``
    cut at ``and`` or ``;`` (else at commas) into as many groups as the list has ids."""
    out: dict[int, str] = {}
    i = 0
    while i < len(found):
        j = i
        while j + 1 < len(found) and _JOINED.match(sentence[found[j].end():found[j + 1].start()]):
            j += 1
        end = found[j + 1].start() if j + 1 < len(found) else len(sentence)
        resp = _RESPECTIVELY.search(sentence, found[j].end(), end)
        if j > i and resp:
            tail = sentence[found[j].end():resp.start()]
            tail = tail[tail.find("(") + 1:] if "(" in tail else tail
            for cut in (r"\s*(?:;|\band\b)\s*", r"\s*(?:,|;|\band\b)\s*"):
                groups = [g for g in re.split(cut, tail) if figures_in(g)]
                if len(groups) == j - i + 1:
                    out.update({i + k: g for k, g in enumerate(groups)})
                    break
        i = j + 1
    return out


def mentions(note: str, ids, *, checked: bool = False) -> list[Mention]:
    """Each case id of ``ids`` named in the note's prose: its sentence, its segment (up to the next case id, ``;`` or
    the sentence's end; a list's own figures where it takes them ``respectively``) and the outcome the sentence (or the
    part of it the id is in, :func:`parts`) claims; ``checked``: in all the note's text (``statements``)."""
    pattern, out = id_pattern(ids), []
    for sentence in statements(note, checked=checked):
        found = list(pattern.finditer(sentence))
        if not found:
            continue
        blank = pattern.sub(lambda m: "#" * len(m.group(0)), sentence)  # the sentence's words, not its case ids'
        pieces = [(a, a + len(text)) for a, text in parts(blank)]
        own = _respective(sentence, found)
        for n, (m, nxt) in enumerate(zip(found, found[1:] + [None])):
            end = nxt.start() if nxt else len(sentence)
            semi = sentence.find(";", m.end(), end)
            a, b = next(((a, b) for a, b in pieces if a <= m.start() < b), (0, 0))
            segment = own.get(n, sentence[m.end():semi if semi >= 0 else end])
            out.append(Mention(m.group(1), sentence, segment, outcome_of(blank, a, b) if b else None,
                               unaffirmed(blank, a, b) if b else {},
                               tuple(k for k in OUTCOME_WORDS if b and _claimed(blank, k, a, b))))
    return out


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


@dataclasses.dataclass(frozen=True)
class Count:
    """A count the text claims: ``n`` cases of ``outcome``, read from ``words``."""

    outcome: str
    n: int
    words: str


def counts_in(text: str) -> list[Count]:
    """Each count in ``text``, in the order written: a number bound to an outcome word of :data:`OUTCOME_WORDS`, either
    before it ("4 wins", "3 faster cases", "3 cases are faster", "3 are faster") or after it ("wins on 4 cases", "wins
    3 cases", "faster in 3 cases", "within the noise on 4"), or "no" before an outcome named as a thing ("no wins",
    :data:`_COUNT_NONE`); a number after a bound ("more than 3 wins"), a count its sentence does not assert ("not
    faster in 3 cases", "expected to win 3", a question: :func:`asserted`) or a number bound to another noun
    (``2 fallback runs``, ``faster on 2 rows``, ``loses 1 us``, :data:`_OTHER_NOUN`) counts nothing.

    >>> [(c.outcome, c.n) for c in counts_in("3 faster cases, 2 slower cases and 4 neutral cases; 3 are faster")]
    [('win', 3), ('loss', 2), ('neutral', 4), ('win', 3)]
    >>> [(c.outcome, c.n) for c in counts_in("wins on 3, is within the noise on 4 and loses on 2; wins 3 cases")]
    [('win', 3), ('neutral', 4), ('loss', 2), ('win', 3)]
    >>> counts_in("its timings (300 vs 240 us) compare two fallback runs; faster on 2 rows; loses 1 us")
    []
    >>> [(c.outcome, c.n) for c in counts_in("no wins at all; zero losses; no regression elsewhere; no slower")]
    [('win', 0), ('loss', 0)]
    >>> counts_in("We expected it to win 3 cases. Would 2 cases be slower? It fails to win on 3.")
    []
    """
    found: dict[int, Count] = {}
    for m in _COUNT_BEFORE.finditer(text):
        if not _BOUNDED.search(text[:m.start()]) and asserted(text, m.start(_outcome_group(m))):
            found.setdefault(m.start("n"), Count(_outcome_group(m), _number(m.group("n")), m.group(0)))
    for m in [*_COUNT_AFTER.finditer(text), *_COUNT_LABEL.finditer(text)]:
        if asserted(text, m.start()):
            found.setdefault(m.start("n"), Count(_outcome_group(m), _number(m.group("n")), m.group(0)))
    for m in _COUNT_NONE.finditer(text):
        named = m.group(_outcome_group(m))
        if (m.group("cases") or re.fullmatch(_NOUNS, named, re.IGNORECASE)) and asserted(text, m.start()):
            found.setdefault(m.start(), Count(_outcome_group(m), 0, m.group(0)))
    return [found[k] for k in sorted(found)]


def _outcome_group(m: re.Match) -> str:
    return next(k for k in OUTCOME_WORDS if m.group(k))


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS.index(word.lower())


def count_claims(text: str) -> list[tuple[str, int]]:
    """``(outcome, n)`` for each count in ``text`` (:func:`counts_in`)."""
    return [(c.outcome, c.n) for c in counts_in(text)]


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


#: A statement of how the device is synchronized before a timing is read, in any words: synchronized, waits for the
#: device or kernel to finish, blocks until, CPU calls return when done, CUDA events.
_SYNC = re.compile(r"synchron|\bsync|\bwait(s|ed|ing)?\b[^.]*\b(device|gpu|kernel|finish\w*|complet\w*|done)\b|"
                   r"\bblock(s|ed|ing)?\b[^.]*\buntil\b|\breturns?\b[^.]*\b(when|once|after)\b[^.]*"
                   r"\b(done|finish\w*|complet\w*)\b|\bcuda events?\b", re.IGNORECASE)
#: What a synchronization guards: the timing (its reading, its measurement) or the kernel it waits for.
_GUARDED = re.compile(r"\btim(e|es|ed|er|ers|ing|ings)\b|\bread\w*|\bmeasur\w*|\bkernels?\b|\blaunch\w*",
                      re.IGNORECASE)


def stated(fact: str, text: str) -> bool:
    """Whether ``text`` gives the record's own statement ``fact`` (its text after a ``label:``), spacing and case
    aside."""
    said = " ".join(fact.split(":", 1)[-1].split()).lower()
    return bool(said) and said in " ".join(text.split()).lower()


def method_facts(note: str, h: dict) -> dict[str, bool]:
    """Each fact of the method record ``h`` (the environment's ``harness``) -> whether a sentence of ``note`` states
    it: the timer in a sentence about timing, the warm-up as a warm-up of so many ms, the synchronization with what it
    guards (or in the record's own words), the statistic with its sample count, the spread's quantiles joined as a
    range (``q80 - q20``, ``20th to 80th percentile``), the raw samples' file with what it holds."""
    sents = statements(note)
    timer, raw, w, n = h["timer"], h["raw_samples"], re.escape(str(h["warmup_ms"])), re.escape(str(h["samples"]))
    hi, lo = (sorted(re.findall(r"\d+", h["spread"]), key=int) or ["20", "80"])[::-1][:2]

    def any_sentence(test) -> bool:
        return any(test(s) for s in sents)

    def ranged(s: str) -> bool:
        return bool(re.search(rf"q{hi}\s*[-−–]\s*q{lo}\b|q{lo}\s*(?:-|–|to|and)\s*q{hi}\b|(?<![\w.]){lo}\s*(?:%|th)?\s*"
                              rf"(?:-|–|to|and)\s*(?:the\s+)?{hi}\s*(?:%|th)?(?!\d)", s, re.IGNORECASE))

    return {
        "timer": any_sentence(lambda s: timer in s and bool(re.search(
            r"\btim(e|es|ed|er|ing|ings)\b|\bmeasur\w*|\bclock\w*", s.replace(timer, " "), re.IGNORECASE))),
        "warmup": any_sentence(lambda s: bool(re.search(
            rf"warm\w*[\s-]*up\w*\W+(?:\w+\W+){{0,3}}?{w}\s*ms\b|(?<![\w.]){w}\s*ms\b\W+(?:\w+\W+){{0,2}}?warm\w*[\s-]*up",
            s, re.IGNORECASE))),
        "sync": any_sentence(lambda s: bool(_SYNC.search(s)) and bool(_GUARDED.search(_SYNC.sub(" ", s))))
        or stated(h["sync"], visible_text(note)),
        "statistic": any_sentence(lambda s: bool(re.search(rf"\b{re.escape(h['statistic'])}s?\b", s, re.IGNORECASE))
                                  and bool(re.search(rf"(?<![\w.]){n}\s+(?:\w+\s+){{0,2}}?{_SAMPLES}\b", s,
                                                     re.IGNORECASE))),
        "spread": any_sentence(ranged),
        "raw": any_sentence(lambda s: raw in s and bool(re.search(
            r"\braw\b|\bsamples?\b|\bstored\b|\bsaved\b|\bwritten\b|\bkept\b|\brecorded\b|\blogged\b|\bfiles?\b",
            s.replace(raw, " "), re.IGNORECASE))),
    }


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
