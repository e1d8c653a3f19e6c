"""exercises/ is generated from solutions/ by tools/make_exercises.py, and CI verifies the two are in sync."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat  # noqa: F401  (tools/make_exercises.py needs it: the module is left out where it is missing)
import pytest

ROOT = Path(__file__).resolve().parents[1]
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
