"""What a sentence asserts of a word in it: a sentence asserts an outcome ("faster", "wins", "within the noise") or a
fact only where it affirms it. A word is not asserted where its sentence asks, supposes, denies or hedges it, or its
own clause negates it or makes it modal, wherever in the clause that stands (not only next to the word):

>>> [asserted(s, s.index("faster")) for s in ("c05 is faster.", "c05 failed to be faster.",
...  "c05 was expected to be faster.", "c05 is faster? No.", "c05 is anything but faster.", "c05 would be faster.",
...  "If c05 were faster, we would say so.", "c05 turned out to be faster.", "Without the cast, c05 is faster.")]
[True, False, False, False, False, False, False, True, True]
>>> [asserted(s, s.index("slower")) for s in ("It is a myth that c05 is slower.", "We deny that c05 is slower.",
...  "c05 is not, whatever the table suggests, slower.", "c05 might perhaps be slower.", "As expected, c05 is slower.")]
[False, False, False, False, True]
>>> [stance(s, s.index("slower")) for s in ("c05 is slower.", "It is untrue that c05 is slower.",
...  "Perhaps c05 is slower.", "It is a myth that c05 is not slower.")]
['asserted', 'denied', 'open', 'open']

The structure read: a sentence (up to ``.``, ``!`` or ``?``) is cut into clauses at ``;``, ``:`` and the conjunctions
that open a clause of its own (``but``, ``while``, ``whereas``, ``yet``, ``although``, ``though``, ``however``). A
word's clause runs from the clause's start to the word, less the comma or parenthesis pieces that open it without a
verb of their own ("As expected, ...", "Without the cast, ...", "c05, expected to win, loses"); a negation or a
modal anywhere in what remains takes the word back ("c05 is not, whatever the table suggests, slower"). A denial
(``myth``, ``untrue``, ``false``, ``deny``) or a supposition (``if``, ``whether``, ``perhaps``) anywhere before the word
in its sentence (up to a ``;``), or after it in its clause, takes it back too, and so does a question mark.
"""

from __future__ import annotations

import re

__all__ = ["asserted", "stance", "NOT_AFFIRMED"]

#: How the feedback tells a writer whose claim was not read: what was not asserted earns nothing.
NOT_AFFIRMED = ("state it affirmatively: a sentence that negates, denies, asks, supposes or hedges a claim (`not`, "
                "`never`, `myth`, `untrue`, `deny`, `if`, `whether`, `would`, `might`, `perhaps`, a `?`) asserts "
                "nothing")
#: Words of negative polarity: a negation, or a degree that denies ("hardly", "anything but", "rather than").
_NEGATION = (r"\b(not|no|never|without|none|nor|neither|hardly|scarcely|barely|nowhere|nothing)\b|n't\b|"
             r"\banything but\b|\bfar from\b|\brather than\b|\binstead of\b")
#: A modal: what could, would or should be, or what was expected or hoped for, is not what was measured.
_MODAL = (r"\b(would|could|should|might|may|must|ought|shall|can)\b|'d\b|\b(expect|hope|predict|anticipate|intend|"
          r"plan|wish|want|suppos|believ|assum|guess|imagin|claim|think|thought)(s|ed|d|e|es|ing)?\b")
#: A denial of what follows: it is a myth, untrue, false, wrong or not the case; we deny or dispute it.
_DENIAL = (r"\b(myths?|untrue|false|wrong|incorrect|mistaken|misconception|fiction|fallacy|rumou?r\w*|"
           r"den(y|ies|ied|ying)|refut\w*|disput\w*|reject\w*)\b|\bnot (true|the case|so)\b")
#: A supposition or a hedge: a condition, a question embedded, a maybe.
_SUPPOSED = (r"\b(if|unless|whether|lest|supposing|assuming|hypothetical\w*|perhaps|maybe|possibly|presumably|"
             r"allegedly|supposedly|reportedly|probably|likely|arguably)\b|\bas (though|if)\b|\bin theory\b")
_NEGATION_RE, _MODAL_RE = re.compile(_NEGATION, re.I), re.compile(_MODAL, re.I)
#: A verb of expecting or believing with its ``that`` clause ("we think that c05 is slower") asserts none of it.
_THAT_CLAUSE = re.compile(_MODAL.split("|'d\\b|")[1] + r"\s+(\w+\s+)?that\b", re.I)
_DENIAL_RE, _SUPPOSED_RE = re.compile(_DENIAL, re.I), re.compile(_SUPPOSED, re.I)
#: A condition opened by ``had`` or ``were`` before its subject ("had it been faster", "were c05 faster").
_INVERTED = re.compile(r"^\s*(had|were)\s+(it|they|this|that|these|those|the|we|\S*[\d#]\S*)(\s|$)", re.IGNORECASE)
#: Where a clause of its own begins.
_CLAUSE = re.compile(r"[;:]|\b((?<!anything )but|while|whereas|yet|although|though|however)\b", re.IGNORECASE)
#: Where a piece of a clause begins: a comma, a bracket, a dash.
_PIECE = re.compile(r"[,()\[\]—–]|\s-\s")
#: A relative clause set off by commas: it says something of a noun, not of the clause's word.
_RELATIVE = re.compile(r"^\s*(which|who|whose|whom)\b", re.IGNORECASE)
#: A verb that makes a piece a clause's own (a copula, an auxiliary, a verb of finding; an outcome verb: ``loses``).
_VERB = re.compile(r"\b(is|are|was|were|am|be|been|being|seems?|seemed|looks?|looked|appears?|appeared|remains?|"
                   r"remained|stays?|stayed|becomes?|became|gets?|got|runs?|ran|comes?|came|ends?|ended|proves?|"
                   r"proved|proven|turns?|turned|stands?|stood|does|did|do|has|had|have|wins|won|loses|lost|ties|tied|"
                   r"beats|regress(es|ed)|outperform(s|ed)|improv(es|ed)|gains|gained|trails|trailed|lags|lagged|"
                   r"falls|fell|speeds|shows?|showed|measures?|measured)\b|'s\b|'re\b", re.IGNORECASE)
#: An infinitive just before a word ("to be faster", "to win"): an assertion only where the verb before it reports a
#: finding (:data:`_FINDING`) or it says what a case is ("the only case to win").
_INFINITIVE = re.compile(r"\bto\s+(?:(?:be|have\s+been|become|stay|remain)\s+)?(?:\w+ly\s+)?$", re.IGNORECASE)
_FINDING = re.compile(r"\bturn(s|ed|ing)?\s+out\b|\bprov(e|es|ed|en)\b|\bmanag(e|es|ed)\b|\bhappen(s|ed)?\b|"
                      r"\bseem(s|ed)?\b|\bappear(s|ed)?\b|\b(is|are|was|were|been)\s+(found|shown|measured|observed|"
                      r"confirmed|seen)\b|\b(only|first|last|sole|one)\b(?:\s+\w+)?\s+to\b", re.IGNORECASE)
#: Where a sentence ends: ``.``, ``!`` or ``?`` before a space or the text's end; a decimal point is no end.
_SENTENCE_END = re.compile(r"[.!?](?=[\"')\]*_`]*(\s|$))")


#: A finite verb of the word's own predicate ("are" in "not a measurement 3 cases are faster"): a negation or a modal
#: before it governs another phrase, not the word.
_FINITE = re.compile(r"\b(is|are|was|were|am|seems|seemed|looks|looked|appears|appeared|remains|remained|stays|"
                     r"stayed|becomes|became|gets|got|runs|ran|comes|came|ends|ended|proves|proved|turns|turned|stands|"
                     r"stood|does|did|has|had|wins|won|loses|lost|ties|tied|beats|regress(es|ed)|outperform(s|ed)|"
                     r"improv(es|ed)|gains|gained|trails|trailed|lags|lagged|falls|fell|speeds|shows|showed|measures|"
                     r"measured)\b|'s\b|'re\b", re.IGNORECASE)


def _governing(pattern: re.Pattern, clause: str) -> int:
    """How many words of ``pattern`` in ``clause`` (the text before a word) govern the word: no finite verb of the
    word's own piece stands between them and it ("not a measurement 3 cases are faster" has none; "is not, whatever
    the table suggests, slower" and "would be faster" have one)."""
    n = 0
    for m in pattern.finditer(clause):
        tail = clause[m.end():]
        cuts = list(_PIECE.finditer(tail))
        n += not _FINITE.search(tail[cuts[-1].end():] if cuts else tail)
    return n


def _own_clause(before: str) -> str:
    """The text of a word's clause before it, less the pieces that open it without a verb of their own and the
    relative clauses set off by commas ("c05, which we hoped would win, loses")."""
    starts = [m.end() for m in _CLAUSE.finditer(before)]
    clause = before[starts[-1] if starts else 0:]
    cuts = [0, *(m.end() for m in _PIECE.finditer(clause)), len(clause)]
    pieces = [clause[a:b] for a, b in zip(cuts, cuts[1:])]
    kept = [p for p in pieces[:-1] if not _RELATIVE.match(p)] + pieces[-1:]
    while len(kept) > 1 and not _VERB.search(kept[0]):  # an opening piece with no verb
        kept.pop(0)
    return "".join(kept)


def stance(text: str, at: int) -> str:
    """How ``text`` holds the word at ``at``: ``"asserted"``; ``"denied"`` (negated or denied once, and neither asked,
    supposed nor modal: "c05 is not slower", "it is a myth that c05 is slower"); or ``"open"`` (asked, supposed, hedged,
    modal, hoped for, or negated twice: neither affirmed nor denied)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, at)]
    start = max([ends[-1] if ends else 0, text.rfind(";", 0, at) + 1])
    end = _SENTENCE_END.search(text, at)
    if (end.group(0) if end else text.rstrip()[-1:]) == "?":
        return "open"
    before = text[start:at]
    after = text[at:end.start() if end else len(text)]
    after = re.sub(r"\([^()]*\)", " ", after)  # a parenthesis (the figures) is no end of the clause
    after = after[:m.start()] if (m := re.search(r"[,;:—–]|\s-\s|\b(but|while|whereas|yet|and)\b", after[1:])) \
        else after
    clause = _own_clause(before)
    if _SUPPOSED_RE.search(before) or _SUPPOSED_RE.search(after) or _governing(_MODAL_RE, clause) \
            or _THAT_CLAUSE.search(clause) \
            or _INVERTED.match(clause) or (text[at:at + 1].isalpha() and _INFINITIVE.search(clause)
                                           and not _FINDING.search(clause)):
        return "open"
    denials = _governing(_NEGATION_RE, clause) + len(_DENIAL_RE.findall(before)) + len(
        _DENIAL_RE.findall(after))
    return "asserted" if denials == 0 else "denied" if denials == 1 else "open"


def asserted(text: str, at: int) -> bool:
    """Whether ``text`` asserts the word at ``at`` (:func:`stance`): its sentence asks nothing (it ends with no ``?``),
    supposes and denies nothing before it, and its clause neither negates the word ("not faster", "hardly faster", "is
    not, whatever X says, slower"), nor makes it modal ("would be faster", "had it been faster"), nor puts it in an
    infinitive that another verb hopes, expects or fails to make true ("was expected to be faster", "failed to
    win")."""
    return stance(text, at) == "asserted"
