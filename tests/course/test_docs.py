"""The reference page's copy of the predicate table is the one the declarations render."""

from __future__ import annotations

import pathlib

from fastpath_lib.rmsnorm.predicate import PREDICATE

REFERENCE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def test_reference_predicate_table_is_current():
    text = REFERENCE.read_text()
    block = text.split("<!-- predicate-table:start -->", 1)[1].split("<!-- predicate-table:end -->", 1)[0]
    assert block.strip() == PREDICATE.markdown_table().strip(), "regenerate with PREDICATE.markdown_table()"
