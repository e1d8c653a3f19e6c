"""Every lesson and solution is a jupytext pair: a ``py:percent`` source and a notebook with the same cells.

The sources (``notebooks/NN_*.py``, ``solutions/exNN_*.py``) are what maintainers edit; the notebooks hold the same
cells plus the saved outputs nbval compares. These tests check that each pair agrees cell by cell (count, order,
type, source, tags), that editing either side is detected, that re-pairing keeps cell ids, and that
``./kit lessons`` (``tools/execute_notebooks.py``) executes a stale pair with the interpreter opted in. That
``exercises/`` is generated from ``solutions/`` is checked by ``test_exercises_sync.py`` (``make_exercises --check``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

jupytext = pytest.importorskip("jupytext")

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "execute_notebooks.py"


def _tool():
    spec = importlib.util.spec_from_file_location("execute_notebooks", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


ex = _tool()
PAIRS = ex.pairs()


def _copy_pair(pair, folder: Path):
    """A copy of ``pair`` under ``folder/<notebooks|solutions>/`` (the notebook written first, the source after)."""
    dst = folder / pair.notebook.parent.name
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy2(pair.notebook, dst / pair.notebook.name)
    shutil.copy2(pair.source, dst / pair.source.name)
    new = ex.Pair(dst / pair.notebook.name, dst / pair.source.name)
    now = time.time()
    os.utime(new.notebook, (now - 60, now - 60))
    os.utime(new.source, (now, now))
    return new


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
    os.utime(path)


def _ids(path: Path) -> list[str]:
    return [c.id for c in nbformat.read(path, as_version=4).cells]


def test_every_lesson_and_solution_is_paired_with_a_percent_script():
    lessons = [p for p in PAIRS if p.notebook.parent.name == "notebooks"]
    solutions = [p for p in PAIRS if p.notebook.parent.name == "solutions"]
    assert len(lessons) >= 8 and len(solutions) >= 8, PAIRS
    exercises = {p.name for p in (ROOT / "exercises").glob("ex[0-9][0-9]_*.ipynb")}
    assert {p.notebook.name for p in solutions} == exercises, "every exercise comes from a paired solution"
    for pair in PAIRS:
        assert pair.notebook.exists() and pair.source.exists(), pair
        nb = ex.read_notebook(pair)
        assert nb.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent", pair.notebook
        src = ex.read_source(pair)
        assert src.metadata["jupytext"]["formats"] == "ipynb,py:percent", pair.source
        assert src.metadata["jupytext"]["text_representation"]["format_name"] == "percent", pair.source


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.notebook.relative_to(ROOT).as_posix())
def test_notebook_agrees_with_its_source(pair):
    diff = ex.differences(ex.read_notebook(pair), ex.read_source(pair))
    assert not diff, (f"{pair.name} and {pair.source.name} disagree (edit the .py, then ./kit lessons; or save the "
                      f"notebook in ./kit lab, which writes both):\n" + "\n".join(diff))


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.notebook.relative_to(ROOT).as_posix())
def test_notebook_is_saved_executed_with_unique_cell_ids(pair):
    nb = ex.read_notebook(pair)
    nbformat.validate(nb)
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids), f"{pair.name}: duplicate cell ids"
    assert not ex.unexecuted(nb), f"{pair.name}: code cells never executed: {ex.unexecuted(nb)} (./kit lessons)"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.source.relative_to(ROOT).as_posix())
def test_source_is_plain_python(pair):
    ast.parse(pair.source.read_text(), filename=str(pair.source))  # magics are commented out: a linter can read it


def test_the_grader_metadata_is_in_the_solution_sources():
    for pair in PAIRS:
        if pair.notebook.parent.name == "solutions":
            meta = ex.read_source(pair).metadata
            assert meta.get("fastpath", {}).get("exercise") == pair.notebook.name[:4], pair.source


def test_exercises_have_no_text_source_and_no_pairing():
    assert not list((ROOT / "exercises").glob("*.py"))
    for path in sorted((ROOT / "exercises").glob("ex*.ipynb")):
        assert "jupytext" not in nbformat.read(path, as_version=4).metadata, path


# --- the agreement check can fail ---------------------------------------------------------------------------------

LESSON = next(p for p in PAIRS if p.notebook.name.startswith("02_"))


def test_an_edited_code_cell_in_the_source_is_detected(tmp_path):
    pair = _copy_pair(LESSON, tmp_path)
    assert ex.status(pair) == ("ok", [])
    _edit(pair.source, "import inspect\n", "import inspect  # edited\n")
    state, reasons = ex.status(pair)
    assert state == "stale"
    assert any("(code) differs" in r and "# edited" in r for r in reasons), reasons


def test_markdown_tags_deleted_and_reordered_cells_are_detected(tmp_path):
    base = _copy_pair(LESSON, tmp_path / "md")
    _edit(base.source, "# # 02 · The Triton kernels", "# # 02 · The Triton kernel")
    assert any("(markdown) differs" in r for r in ex.status(base)[1])

    tags = _copy_pair(LESSON, tmp_path / "tags")
    _edit(tags.source, '# %% tags=["nbval-ignore-output"]\n', "# %%\n")
    assert any("metadata" in r and "nbval-ignore-output" in r for r in ex.status(tags)[1])

    src = jupytext.read(LESSON.source)
    dropped = _copy_pair(LESSON, tmp_path / "dropped")
    del src.cells[3]
    jupytext.write(src, dropped.source, fmt="py:percent")
    reasons = ex.status(dropped)[1]
    assert reasons[0].endswith(f"{len(src.cells) + 1} cells in the notebook, {len(src.cells)} in the source")

    src = jupytext.read(LESSON.source)
    swapped = _copy_pair(LESSON, tmp_path / "swapped")
    src.cells[3], src.cells[4] = src.cells[4], src.cells[3]
    jupytext.write(src, swapped.source, fmt="py:percent")
    assert ex.status(swapped)[0] == "stale"


def test_a_notebook_edited_without_the_pairing_is_refused(tmp_path):
    pair = _copy_pair(LESSON, tmp_path)
    nb = nbformat.read(pair.notebook, as_version=4)
    nb.cells[0].source += "\n\nEdited in the notebook only."
    nbformat.write(nb, pair.notebook)
    os.utime(pair.source, (time.time() - 60, time.time() - 60))
    state, reasons = ex.status(pair)
    assert state == "refused" and "jupytext --sync" in reasons[0], reasons


def test_kit_lessons_list_exits_1_naming_the_stale_pair(tmp_path):
    for pair in PAIRS[:2]:
        _copy_pair(pair, tmp_path)
    args = [sys.executable, str(TOOL), "--root", str(tmp_path), "--list"]
    res = subprocess.run(args, capture_output=True, text=True)
    assert res.returncode == 0 and "0 to execute" in res.stdout, res.stdout + res.stderr
    _edit(tmp_path / "notebooks" / PAIRS[1].source.name, "\n# %%", "\n# %%\nprint('a new cell')\n\n# %%")
    res = subprocess.run(args, capture_output=True, text=True)
    assert res.returncode == 1 and f"notebooks/{PAIRS[1].notebook.name}: stale" in res.stdout, res.stdout
    assert "not in the notebook: \"print('a new cell')\"" in res.stdout, res.stdout


# --- cell ids stay stable -----------------------------------------------------------------------------------------

def test_jupytext_sync_keeps_the_cell_ids(tmp_path):
    pair = _copy_pair(LESSON, tmp_path)
    before = _ids(pair.notebook)
    _edit(pair.source, "import inspect\n", "import inspect  # edited\n")
    res = subprocess.run([Path(sys.executable).with_name("jupytext"), "--sync", str(pair.source)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert _ids(pair.notebook) == before
    assert ex.status(pair)[0] == "ok"


def test_the_rebuilt_notebook_keeps_ids_and_tags_and_only_a_new_cell_gets_a_new_id(tmp_path):
    pair = _copy_pair(LESSON, tmp_path)
    before = nbformat.read(pair.notebook, as_version=4)
    src = jupytext.read(pair.source)
    src.cells[2].source += "\nprint('edited')"
    src.cells.insert(5, nbformat.v4.new_code_cell("print('inserted')"))
    jupytext.write(src, pair.source, fmt="py:percent")
    nb = ex.merged(pair)
    ids = [c.id for c in nb.cells]
    assert ids[:5] + ids[6:] == [c.id for c in before.cells]
    assert ids[5] not in ids[:5] + ids[6:]
    assert [c.metadata.get("tags") for c in nb.cells[:5] + nb.cells[6:]] == [c.metadata.get("tags")
                                                                          for c in before.cells]
    assert nb.cells[2].source.endswith("print('edited')")
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert not ex.differences(nb, src)


# --- ./kit lessons executes ---------------------------------------------------------------------------------------

TINY = '''# %% [markdown]
# # A tiny lesson

# %% tags=["nbval-ignore-output"]
import os
print("TRITON_INTERPRET =", os.environ.get("TRITON_INTERPRET"))

# %%
print(6 * 7)
'''


def test_kit_lessons_executes_the_changed_pair_keeping_ids_and_tags(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    source, notebook = folder / "00_tiny.py", folder / "00_tiny.ipynb"
    source.write_text(TINY)
    nb = jupytext.read(source)
    for i, cell in enumerate(nb.cells):
        cell.id = f"tiny-{i}"
    nbformat.write(nb, notebook)
    os.utime(notebook, (time.time() - 60, time.time() - 60))
    other = _copy_pair(LESSON, tmp_path)  # agrees with its source: not executed
    other_bytes = other.notebook.read_bytes()

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the tool must opt in by itself
    res = subprocess.run([sys.executable, str(TOOL), "--root", str(tmp_path)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "00_tiny.ipynb: executing" in res.stdout and LESSON.notebook.name not in res.stdout, res.stdout
    assert other.notebook.read_bytes() == other_bytes, "a notebook that agrees with its source was rewritten"

    saved = json.loads(notebook.read_text())
    assert [c["id"] for c in saved["cells"]] == ["tiny-0", "tiny-1", "tiny-2"]
    assert saved["cells"][1]["metadata"] == {"tags": ["nbval-ignore-output"]}
    assert saved["metadata"]["jupytext"]["formats"] == "ipynb,py:percent"
    text = ["".join(o.get("text", "")) for c in saved["cells"][1:] for o in c["outputs"]]
    import torch

    want = "TRITON_INTERPRET = 1" if not torch.cuda.is_available() else "TRITON_INTERPRET ="
    assert text[0].startswith(want) and text[1] == "42\n", text
    assert source.stat().st_mtime >= notebook.stat().st_mtime
    assert ex.status(ex.Pair(notebook, source)) == ("ok", [])

    res = subprocess.run([sys.executable, str(TOOL), "--root", str(tmp_path), "--list"], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout


def test_kernelspec_is_the_one_jupyterlab_writes():
    """A save in JupyterLab rewrites the kernelspec with the kernel's display name; the sources already carry it, so
    saving a lesson or solution there leaves its .py unchanged (the browser test saves one and compares)."""
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    spec = kernelspec.KernelSpecManager().get_kernel_spec("python3")
    want = {"name": "python3", "display_name": spec.display_name, "language": spec.language}
    paths = [p.notebook for p in PAIRS] + [p.source for p in PAIRS] + sorted((ROOT / "exercises").glob("ex*.ipynb"))
    wrong = [str(p.relative_to(ROOT)) for p in paths if dict(jupytext.read(p).metadata.get("kernelspec", {})) != want]
    assert not wrong, f"kernelspec is not {want} in: {wrong}"
