"""An exercise's instructions state what its check holds the learner to, taken from the check's own constants: the
answers a small answer space accepts, the limits a check refuses beyond, the columns a function is handed, and a spec
that runs as written (issue 44, reader 8 items 3, 7, 8, 9 and 11). In-process: the exercises' text is read, no kernel
starts."""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _markdown(exercise: str) -> str:
    (path,) = (ROOT / "exercises").glob(f"{exercise}_*.ipynb")
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")


def _code(exercise: str) -> str:
    (path,) = (ROOT / "exercises").glob(f"{exercise}_*.ipynb")
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")


def test_ex13_names_every_answer_its_check_accepts():
    """``switch`` is accepted in three exact forms: the instruction gives each (and every verdict and action)."""
    from fastpath_lib.grading.rules.ex13_scenarios import ACTIONS, SWITCHES, VERDICTS

    text = _markdown("ex13")
    missing = [w for w in (*VERDICTS, *ACTIONS, *SWITCHES) if f'"{w}"' not in text]
    assert not missing, missing


def test_ex08_states_the_element_cap_of_its_evidence_check():
    from fastpath_lib.grading.checks import ex08_evidence

    cap = ex08_evidence._MAX_ELEMENTS
    assert f"2**{int(math.log2(cap))} elements" in _markdown("ex08") and 2 ** int(math.log2(cap)) == cap


def test_ex06_names_the_columns_my_classify_is_handed():
    """The rule's formula reads the table's own columns (``row["baseline_median_us"]``), none that is not there."""
    from fastpath_lib.grading.materials import RESULT_COLUMNS

    text = _markdown("ex06")
    used = set(re.findall(r'row\["(\w+)"\]', text))
    assert used and used <= set(RESULT_COLUMNS), used - set(RESULT_COLUMNS)
    named = set(re.findall(r"`(\w*(?:median|spread)\w*)`", text))
    assert named <= set(RESULT_COLUMNS), named - set(RESULT_COLUMNS)


def test_ex02_prints_the_memory_rule_its_check_holds():
    from fastpath_lib.grading.checks.ex02_kernel import MEMORY_RULE

    (path,) = (ROOT / "solutions").glob("ex02_*.ipynb")
    printed = "".join(o.get("text", "") for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert all(clause in printed for clause in MEMORY_RULE), MEMORY_RULE
    assert "ex.MEMORY_RULE" in _code("ex02")  # the exercise prints it too (the cell is no stub)


def _spec_block(exercise: str) -> str:
    (block,) = re.findall(r"```python\n(.*?)```", _markdown(exercise).split("## The spec", 1)[1], re.S)[:1]
    return block


@pytest.mark.parametrize("shape, dtype, slice_rows", [
    ((4, 64), torch.float16, False), ((2, 3, 40), torch.float16, False), ((6, 24), torch.float16, True),
    ((1, 9000), torch.float32, False)])
def test_ex03s_spec_runs_as_written_and_agrees_with_its_check(shape, dtype, slice_rows):
    """Every name the spec uses is defined in it or by the notebook (``ex``, ``torch``, ``math``), and it decides as
    the check does."""
    from types import SimpleNamespace

    from fastpath_lib import exercises as ex
    from fastpath_lib.grading.checks.ex03_predicate import _v2_expected

    x = torch.zeros(shape, dtype=dtype)
    if slice_rows:  # rows 12 columns apart: a row stride of 24 bytes, not a multiple of 32
        x = torch.zeros((shape[0], shape[1] + 12), dtype=dtype)[:, 12:]
    ns: dict = {"x": x, "ex": ex, "torch": torch, "math": math}
    exec(_spec_block("ex03"), ns)
    ctx = SimpleNamespace(input=x)
    for name in ("dtype", "cols", "alignment"):
        assert ns[f"{'align' if name == 'alignment' else name}_ok"] == _v2_expected(name, ctx), (name, shape)


_ORDINALS = ("first", "second", "third", "fourth")


def test_ex11_names_its_gates_by_the_bullets_that_state_them():
    """"The second and third rules" are the bullets of the gates (``_GATES``), one behaviour change per commit and
    every commit green, in the list's own order."""
    from fastpath_lib.grading.checks.ex11_commits import _GATES

    text = _markdown("ex11")
    bullets = re.findall(r"^\* (.+?)(?=^\*|^\n|\Z)", text.split("\n\n", 2)[2], re.M | re.S)
    said = re.search(r"earns points once it keeps the (\w+) and (\w+) rules", text)
    assert said and len(bullets) == 3, (said, bullets)
    named = [bullets[_ORDINALS.index(w)] for w in said.groups()]
    words = {"one_change_per_commit": "**one** behaviour change", "every_commit_green": "every commit builds"}
    assert [words[g] in b for g, b in zip(_GATES, named)] == [True, True], named
