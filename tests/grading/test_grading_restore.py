"""The grader puts a notebook's check cells back from its own copy
(:func:`fastpath_lib.grading.engine.notebook.restore`), also in a notebook saved without cell ids (nbformat 4.4: Colab,
older tools)."""

from __future__ import annotations

import json

import nbformat
import pytest

from fastpath_lib.grading.engine import notebook as NB
from fastpath_lib.runtime import ROOT


def _without_ids(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["nbformat_minor"] = 4
    for cell in doc["cells"]:
        cell.pop("id", None)
    return nbformat.reads(json.dumps(doc), as_version=4)


def _checks_at(nb):
    return [i for i, c in enumerate(nb.cells) if c.get("cell_type") == "code" and NB.calls(c.source)]


@pytest.mark.parametrize("name", ["ex01_reference", "ex13_review_readiness"])
def test_check_cells_of_a_notebook_without_ids_are_restored_in_place(name):
    solved = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    nb = _without_ids(ROOT / "solutions" / f"{name}.ipynb")
    for i in _checks_at(nb):  # the learner's copies edited: each still calls the same check
        nb.cells[i].source = nb.cells[i].source.replace("(", "( ", 1)
    ids, notes = NB.restore(nb, nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4))
    assert len(nb.cells) == len(solved.cells)  # nothing inserted twice, nothing left over
    assert _checks_at(nb) == _checks_at(solved)
    assert [nb.cells[i].get("id") for i in _checks_at(nb)] == ids
    assert [nb.cells[i].source for i in _checks_at(nb)] == [solved.cells[i].source for i in _checks_at(solved)]
    assert all("found by its calls" in n for n in notes) and len(notes) == len(ids)


def test_a_deleted_check_cell_of_a_notebook_without_ids_goes_after_the_cell_before_it():
    nb = _without_ids(ROOT / "solutions" / "ex01_reference.ipynb")
    first = _checks_at(nb)[0]
    del nb.cells[first]
    ids, notes = NB.restore(nb, nbformat.read(ROOT / "exercises" / "ex01_reference.ipynb", as_version=4))
    assert nb.cells[first].get("id") == ids[0] and nb.cells[first - 1].source.startswith("def my_default_eps")
    assert notes[0] == f"check cell {ids[0]} was deleted: restored"
