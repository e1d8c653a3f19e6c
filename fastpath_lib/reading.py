"""What a reader sees of a Markdown text: the words outside folded ``<details>`` blocks (a PR note's word limit,
for bench's notes and for exercise 07's check alike)."""

from __future__ import annotations

import re

__all__ = ["words_outside_details"]

_TAG = re.compile(r"<(/?)(details|summary)\b([^>]*)>", re.IGNORECASE)


def words_outside_details(markdown: str) -> int:
    """Words a reader sees with every closed ``<details>`` block folded: its ``<summary>`` line counts, its body does
    not; a block never closed folds nothing, and ``<details open>`` folds nothing (a reader sees it expanded). A word
    is a whitespace-separated token with a letter or a digit in it (so a table's ``|`` and ``---`` are not words).

    >>> words_outside_details("Two words <details><summary>one</summary> hidden | text </details> and | three.")
    5
    >>> words_outside_details("<details open><summary>one</summary> shown text </details> and more")
    5
    """
    visible, pos, opened, in_summary = [], 0, 0, False
    stack: list[bool] = []  # each open <details>: whether it folds its body
    for m in _TAG.finditer(markdown):
        closing, tag = m.group(1) == "/", m.group(2).lower()
        depth = sum(stack)
        if depth == 0 or (depth == 1 and in_summary):
            visible.append(markdown[pos:m.start()])
        if tag == "details":
            if not closing:
                folds = not re.search(r"\bopen\b", m.group(3) or "", re.IGNORECASE)
                if folds and depth == 0:
                    opened = m.start()
                stack.append(folds)
            elif stack:
                stack.pop()
        elif sum(stack) == 1:
            in_summary = not closing
        pos = m.end()
    visible.append(markdown[pos:] if sum(stack) == 0 else markdown[opened:])  # an unclosed block hides nothing
    return sum(1 for tok in " ".join(visible).split() if re.search(r"[A-Za-z0-9]", tok))
