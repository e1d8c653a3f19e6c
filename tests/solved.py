"""The solutions' own code, for the grading tests: each solution's cells run in one namespace, check cells left out."""

from __future__ import annotations

import linecache
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[1]
_SOLVED: dict[str, dict] = {}


def solved(exercise: str) -> dict:
    """The namespace of a solution's cells (``solutions/<exercise>_*.py``), check cells left out; cached."""
    if exercise not in _SOLVED:
        (path,) = (ROOT / "solutions").glob(f"{exercise}_*.py")
        ns: dict = {}
        for i, cell in enumerate(jupytext.read(path).cells):
            if cell.cell_type != "code" or "grader-check" in cell.metadata.get("tags", []):
                continue
            name = f"<{path.name} cell {i}>"  # Triton's interpreter reads a kernel's source back through linecache
            linecache.cache[name] = (len(cell.source), None, cell.source.splitlines(True), name)
            exec(compile(cell.source, name, "exec"), ns)
        _SOLVED[exercise] = ns
    return _SOLVED[exercise]


def earned(results) -> int:
    """Points earned over a check's results."""
    return sum(r.earned for r in results)


def digest(paths) -> dict:
    """Each file's sha256, to show that grading read a notebook and never wrote it."""
    import hashlib

    return {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


def grade_unchanged(paths, timeout: float = 120) -> list:
    """Each notebook graded by the grader (its kernel in the sandbox where it starts), none of them modified."""
    from fastpath_lib.grading.engine import cli

    before = digest(paths)
    grades = [cli.grade_notebook(p, timeout=timeout) for p in paths]
    assert digest(paths) == before, "grading modified a graded notebook"
    return grades
