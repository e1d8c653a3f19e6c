"""Every notebook's prose renders as prose: a title, and no accidental code block.

Each markdown cell of every lesson, solution and exercise is parsed as CommonMark (markdown-it-py, the parser
jupytext uses; JupyterLab's renderer follows the same block rules). Two things fail:

* an *indented code block*: four or more leading spaces turn a paragraph, heading or list into a grey code block that
  shows literal ``#`` and ``**`` (what a builder's undedented string did to the first cell of every exercise). The
  kit writes code in fenced blocks (```` ```python ````), so an indented block is always an accident;
* a notebook whose first markdown cell does not open with a level-1 heading (``# Title``): the title a learner sees
  in the file's first line and in JupyterLab's table of contents.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

markdown_it = pytest.importorskip("markdown_it")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted([*(ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"), *(ROOT / "solutions").glob("ex*.ipynb"),
                    *(ROOT / "exercises").glob("ex*.ipynb")])
COMMONMARK = markdown_it.MarkdownIt("commonmark")


def markdown_problems(nb) -> list[str]:
    """What would render wrongly in ``nb``'s markdown cells (empty when every cell renders as intended)."""
    cells = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    if not cells:
        return ["no markdown cell, so no title"]
    out = []
    first_index, first = cells[0]
    tokens = COMMONMARK.parse(first.source)
    if not (tokens and tokens[0].type == "heading_open" and tokens[0].tag == "h1"):
        out.append(f"cell {first_index}: the first markdown cell does not open with a '# ' title "
                   f"(it starts {first.source[:50]!r})")
    for i, cell in cells:
        for tok in COMMONMARK.parse(cell.source):
            if tok.type == "code_block":
                text = tok.content.strip().splitlines()[0] if tok.content.strip() else ""
                out.append(f"cell {i}, line {tok.map[0] + 1}: indented by 4+ spaces, renders as a code block: "
                           f"{text[:70]!r} (dedent it; write code in a fenced ``` block)")
    return out


def test_every_kind_of_notebook_is_checked():
    folders = {p.parent.name for p in NOTEBOOKS}
    assert folders == {"notebooks", "solutions", "exercises"}, folders
    assert len(NOTEBOOKS) >= 24


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_markdown_renders_as_prose_with_a_title(path):
    problems = markdown_problems(nbformat.read(path, as_version=4))
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def _nb(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) for s in sources] + [nbformat.v4.new_code_cell("x = 1")]
    return nb


def test_the_checker_accepts_prose_fences_lists_and_html():
    good = _nb("# 01 · Title\n\n**What you will learn**\n- a list item\n  continued\n\n1. numbered\n   more text",
               "Some code:\n\n```python\nfor i in range(3):\n    print(i)\n```",
               "<details><summary>Answer guide</summary>\n\nThe answer.\n</details>")
    assert markdown_problems(good) == []


@pytest.mark.parametrize("first, expected", [
    # the exercises' old first cell: indented heading and text, unindented tail
    ("    # Exercise 04 — boundary cases\n\n    A good set of tests...\n\n**How this works.** Fill in...",
     ["does not open with a '# ' title", "renders as a code block: '# Exercise 04"]),
    ("## Only a subtitle\n\ntext", ["does not open with a '# ' title"]),
    ("# Title\n\nProse, then an accident:\n\n    **bold** that is shown as code",
     ["renders as a code block: '**bold**"]),
])
def test_the_checker_fails_on_code_blocks_and_missing_titles(first, expected):
    problems = markdown_problems(_nb(first))
    assert len(problems) == len(expected), problems
    for want, got in zip(expected, problems):
        assert want in got, (want, got)


def test_the_checker_fails_on_a_notebook_without_markdown():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("# not a title")]
    assert markdown_problems(nb) == ["no markdown cell, so no title"]
