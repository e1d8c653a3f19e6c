"""What a sentence asserts of a word in it: a sentence asserts an outcome ("faster", "wins", "within the noise") or a
fact only where it says it is so. A word under a negation, a modal, a condition, in an infinitive that another verb
expects, hopes or fails to make true, or in a question is not asserted, whatever the word is:

>>> [asserted(s, s.index("faster")) for s in ("c05 is faster.", "c05 failed to be faster.",
...  "c05 was expected to be faster.", "c05 is faster? No.", "c05 is anything but faster.", "c05 would be faster.",
...  "If c05 were faster, we would say so.", "c05 turned out to be faster.", "Without the cast, c05 is faster.")]
[True, False, False, False, False, False, False, True, True]
>>> [asserted(s, s.index("speed-up")) for s in ("We expected a 1.4x speed-up.", "It gives a 1.4x speed-up.")]
[False, True]
"""

from __future__ import annotations

import re

__all__ = ["asserted"]

#: What takes a clause's assertion of a word away, by kind: a word of negative polarity (a negation, or a degree that
#: denies: "hardly", "anything but", "rather than"); a modal (what could, would or should be, or what was expected or
#: hoped for, is not what was measured; "would have been" is the counterfactual); a condition (an ``if``, ``unless``
#: or ``whether`` clause, or one opened by ``had`` or ``were``: "had it been faster"). Each is read in the words of
#: the clause before the word.
_TAKEN_BACK = {
    "negation": r"\b(not|no|never|without|none|nor|neither|hardly|scarcely|barely|nowhere)\b|n't\b|\banything but\b|"
                r"\bfar from\b|\brather than\b|\binstead of\b",
    "modality": r"\b(would|could|should|might|may|must|ought|shall|can)\b|'d\b|\b(expect|hope|predict|anticipate|"
                r"intend|plan|wish|want)(s|ed|d|ing)?\b",
    "condition": r"\b(if|unless|whether|lest)\b|\bas though\b",
}
#: A condition opened by ``had`` or ``were`` before its subject ("had it been faster", "were c05 faster"; a subject is a
#: pronoun, an article or a case id).
_INVERTED = re.compile(r"^\s*(had|were)\s+(it|they|this|that|these|those|the|we|\S*[\d#]\S*)(\s|$)", re.IGNORECASE)
_TAKEN_BACK_RE = re.compile("|".join(f"(?:{w})" for w in _TAKEN_BACK.values()), re.IGNORECASE)
#: Where a clause begins: a mark that closes the clause before it (``, ; : ( ) [ ]``, a dash) or a conjunction.
#: ("anything but" is a negation, not a conjunction).
_CLAUSE_START = re.compile(r"[,;:()\[\]—–]|\s-\s|\b(and|(?<!anything )but|while|whereas|because|since|so|though|"
                           r"although|yet)\b", re.IGNORECASE)
#: An infinitive just before a word ("to be faster", "to win", "to have been clearly slower"): what another verb says of
#: it, an assertion only where that verb reports a finding (:data:`_FINDING`) or the infinitive says what a case is
#: ("the only case to win"); after any other verb (expected, hoped, meant, supposed, failed, tried, needs) it is not.
_INFINITIVE = re.compile(r"\bto\s+(?:(?:be|have\s+been|become|stay|remain)\s+)?(?:\w+ly\s+)?$", re.IGNORECASE)
_FINDING = re.compile(r"\bturn(s|ed|ing)?\s+out\b|\bprov(e|es|ed|en)\b|\bmanag(e|es|ed)\b|\bhappen(s|ed)?\b|"
                      r"\bseem(s|ed)?\b|\bappear(s|ed)?\b|\b(is|are|was|were|been)\s+(found|shown|measured|observed|"
                      r"confirmed|seen)\b|\b(only|first|last|sole|one)\b(?:\s+\w+)?\s+to\b", re.IGNORECASE)
#: How many words of its clause before a word are read (a negation or a modal further back governs another verb: "not
#: a measurement The kernel wins", two lines joined where the first ends without its full stop, keeps its win).
_SCOPE_WORDS = 3
#: Where a sentence ends: ``.``, ``!`` or ``?`` before a space or the text's end (closing quotes, brackets and emphasis
#: aside); a decimal point is no end.
_SENTENCE_END = re.compile(r"[.!?](?=[\"')\]*_`]*(\s|$))")


def asserted(text: str, at: int) -> bool:
    """Whether ``text`` asserts the word at ``at``: its sentence is no question (it ends with no ``?``), nothing in
    the words of its clause before the word takes the assertion back (:data:`_TAKEN_BACK`: "not faster", "hardly
    faster", "would be faster", "if it were faster", "had it been faster") and the word is in no infinitive that
    another verb hopes, expects or fails to make true (:data:`_INFINITIVE`: "was expected to be faster", "failed to
    win")."""
    end = _SENTENCE_END.search(text, at)
    if (end.group(0) if end else text.rstrip()[-1:]) == "?":
        return False
    before = text[:at]
    starts = [m.end() for m in _CLAUSE_START.finditer(before)]
    clause = before[starts[-1] if starts else 0:]
    words = clause.split()
    near = " ".join(words[-_SCOPE_WORDS:])
    if _TAKEN_BACK_RE.search(near) or _INVERTED.match(clause):
        return False
    return not _INFINITIVE.search(clause) or bool(_FINDING.search(clause))
