"""Lesson 09's reading of the vLLM patch ("How a maintainer reads the PR") stays true to what it points at.

The lesson runs vLLM's linters at vLLM's settings: the same rules and column limit as the patch's generator
(``tools/make_upstream.py``), so the lesson cannot pass a file the kit's own check would fail. The tests it names as
worked examples exist under those names, and its saved outputs show what its prose says: every linter passed, the
old bit trick turns the all-ones NaN into ``-0.0``, and the fused op keeps that NaN where the reference has it.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "notebooks" / "09_upstream_review.ipynb"
_spec = importlib.util.spec_from_file_location("make_upstream", ROOT / "tools" / "make_upstream.py")
make_upstream = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_upstream)


@pytest.fixture(scope="module")
def cells():
    return nbformat.read(LESSON, as_version=4).cells


def _code(cells, needle: str):
    found = [c for c in cells if c.cell_type == "code" and needle in c.source]
    assert len(found) == 1, f"{len(found)} code cells contain {needle!r}"
    return found[0]


def _out(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs)


def test_the_lessons_linters_run_at_the_generators_settings(cells):
    src = _code(cells, "LINTERS = ").source
    settings = ast.literal_eval(re.search(r"SETTINGS = (\[.*?\])", src).group(1))
    assert settings[settings.index("--line-length") + 1] == str(make_upstream.WIDTH)
    assert f'"--select", "{make_upstream.RUFF_SELECT}"' in src
    assert f'NEW = "{make_upstream.NEW_FILE}"' in src


def test_the_tests_the_lesson_names_exist(cells):
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    named = re.findall(r"`(tests/(?:\w+/)*test_\w+\.py)::(test_\w+)`", prose)
    assert len(named) >= 2, named
    for path, name in named:
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE), f"{path} has no {name}"
    assert "upstream-reading" not in prose, "the placeholder is still there"


def test_the_saved_outputs_show_what_the_prose_says(cells):
    lint = _out(_code(cells, "for name, cmd in LINTERS.items()"))
    if "skipped" not in lint:
        assert lint.count("exit 0 after") == 3 and "exit 1" not in lint, lint
        assert "All checks passed!" in lint and "Success: no issues found" in lint, lint
    assert "top half 0x8000 = bf16 -0.0" in _out(_code(cells, "bits = 0x7FFFFFFF"))
    nan = _out(_code(cells, '"nan_all_ones"'))
    m = re.search(r"routes \{'triton': 1\} \| NaNs in row 3: kernel (\d+) reference (\d+) of (\d+)", nan)
    assert m and m.group(1) == m.group(2) == m.group(3), nan
    assert "compare_extremes: they match" in nan, nan
    # the two readings of the patch itself (outputs nbval leaves alone: they change with the generated patch)
    table = _out(_code(cells, "FEATURES = "))
    assert re.search(r"registers an IR provider\s+2\s+1", table), table  # the patch's column (two ops) first
    assert re.search(r"touches torch\.cuda\s+False", table), table
    assert "mentions capture: False" in _out(_code(cells, "_supports_rms_norm"))
