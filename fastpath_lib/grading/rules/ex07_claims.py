"""Exercise 07: the pieces of a PR note's reading that the check shares: the rendered note's sections, statements and
table rows (re-exported from :mod:`~fastpath_lib.grading.rules.rendered`), a case-id pattern, and whether a sentence
claims a speed-up (:func:`claims_speedup`, read where it is asserted:
:func:`~fastpath_lib.grading.rules.assertion.asserted`).

Prose outcomes, counts and figures are not read: a note's prose is for a person (the check's ``PROSE_NOTE``).

>>> bool(id_pattern(["c05_1024x128_fp16"]).search("see c05_1024x128_fp16 below"))
True
"""

from __future__ import annotations

import re

from fastpath_lib.reading import words_outside_details
from fastpath_lib.grading.rules.rendered import (all_table_rows, scope_text, sections, statements, table_rows,
                                                 visible_text)
from fastpath_lib.grading.rules.assertion import asserted

__all__ = ["statements", "id_pattern", "sections", "words_outside_details", "table_rows", "scope_text",
           "claims_speedup", "all_table_rows", "visible_text"]


def id_pattern(ids) -> re.Pattern:
    alternatives = "|".join(re.escape(str(c)) for c in sorted(ids, key=lambda c: -len(str(c))))
    return re.compile(rf"(?<![\w])({alternatives})(?![\w])")


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
