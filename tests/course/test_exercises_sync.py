"""exercises/ is generated from solutions/ by tools/make_exercises.py, and CI verifies the two are in sync."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat  # noqa: F401  (tools/make_exercises.py needs it: the module is left out where it is missing)
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "make_exercises.py"


def _tool():
    spec = importlib.util.spec_from_file_location("make_exercises", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exercises_are_in_sync_with_solutions():
    res = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_check_fails_with_a_diff_when_out_of_sync(tmp_path):
    sol, exe = tmp_path / "solutions", tmp_path / "exercises"
    shutil.copytree(ROOT / "solutions", sol)
    shutil.copytree(ROOT / "exercises", exe)
    args = [sys.executable, str(TOOL), "--solutions", str(sol), "--exercises", str(exe)]
    assert subprocess.run(args + ["--check"], capture_output=True).returncode == 0
    target = exe / "ex01_reference.ipynb"
    target.write_text(target.read_text().replace("FILL ME IN", "FILL ME OUT", 1))
    (exe / "ex99_orphan.ipynb").write_text("{}")
    res = subprocess.run(args + ["--check"], capture_output=True, text=True)
    assert res.returncode == 1
    assert "FILL ME OUT" in res.stdout and "ex99_orphan" in res.stdout
    assert subprocess.run(args, capture_output=True).returncode == 0  # regenerate
    (exe / "ex99_orphan.ipynb").unlink()
    assert subprocess.run(args + ["--check"], capture_output=True).returncode == 0


def test_stub_replaces_solution_blocks_keeping_indent():
    mod = _tool()
    src = "def f(x):\n    # BEGIN SOLUTION\n    y = x + 1\n\n    return y\n    # END SOLUTION\n\nf(1)"
    assert mod.stub_source(src) == ("def f(x):\n    # FILL ME IN (roughly 2 lines)\n    raise NotImplementedError\n"
                                    "\nf(1)")
    for bad in ("# BEGIN SOLUTION\nx = 1", "x = 1\n# END SOLUTION", "# BEGIN SOLUTION\n# BEGIN SOLUTION"):
        with pytest.raises(ValueError):
            mod.stub_source(bad)


def test_every_solution_has_work_and_every_exercise_has_no_solution_code():

    for p in sorted((ROOT / "exercises").glob("ex*.ipynb")):
        nb = nbformat.read(p, as_version=4)
        text = "\n".join(c.source for c in nb.cells)
        assert "# FILL ME IN (roughly" in text and "BEGIN SOLUTION" not in text, p
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells
                   if c.cell_type == "code"), p


#: a stub's docstring says what comes back: a value (``Return ...``), an error (``Raise ...``) or, for a kernel,
#: what it writes
_SAYS_RESULT = r"\b(returns?|raises?|writes?)\b"


def _stubs(src: str):
    """``(name, docstring)`` of each function whose own body holds a ``# FILL ME IN`` stub."""
    import ast
    import re

    tree = ast.parse(src)
    lines = src.splitlines()
    stub_lines = {i + 1 for i, line in enumerate(lines) if re.match(r"\s*# FILL ME IN", line)}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        inner = [n for n in ast.walk(fn) if isinstance(n, ast.FunctionDef) and n is not fn]
        own = {k for k in stub_lines if fn.lineno <= k <= fn.end_lineno}
        own -= {k for n in inner for k in range(n.lineno, n.end_lineno + 1)}
        if own:
            yield fn.name, ast.get_docstring(fn) or ""


def _stub_problems(notebooks) -> list[str]:
    import re

    found = []
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and "FILL ME IN" in cell.source:
                found += [f"{path.name}: {name} ({doc[:60]!r})" for name, doc in _stubs(cell.source)
                          if not re.search(_SAYS_RESULT, doc, re.IGNORECASE)]
    return found


def test_every_stub_says_what_it_returns():
    """A learner fills in a function from its stub: its docstring names what it returns (``Return a list of
    4-tuples (case_id, CaseSpec, expected, rationale)``), so the form is never learnt from the check's error."""
    notebooks = sorted((ROOT / "exercises").glob("ex*.ipynb"))
    graded = set()
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and "FILL ME IN" in cell.source:
                graded |= {name for name, _ in _stubs(cell.source)}
    assert len(graded) >= 25, sorted(graded)  # every exercise's stubs are read (ex02's kernel and launcher included)
    assert not _stub_problems(notebooks), _stub_problems(notebooks)


def test_a_stub_without_its_return_form_is_found(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "def my_matrix():\n    # FILL ME IN (roughly 3 lines)\n    raise NotImplementedError\n\n\n"
        "def given():\n    return 1\n\n\n"
        "def told():\n    \"\"\"Return a list.\"\"\"\n"
        "    # FILL ME IN (roughly 1 line)\n    raise NotImplementedError\n")])
    nbformat.write(nb, tmp_path / "ex99_x.ipynb")
    assert _stub_problems([tmp_path / "ex99_x.ipynb"]) == ["ex99_x.ipynb: my_matrix ('')"]
