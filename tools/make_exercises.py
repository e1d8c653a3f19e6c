"""Derive ``exercises/`` from ``solutions/``: solution blocks become stubs, outputs are cleared.

    python tools/make_exercises.py           # (re)write exercises/exNN_*.ipynb from solutions/
    python tools/make_exercises.py --check   # exit 1 with a diff when exercises/ is out of sync

In a code cell, the lines from ``# BEGIN SOLUTION`` to ``# END SOLUTION`` (markers included) become::

    <indent># FILL ME IN (roughly N lines)
    <indent>raise NotImplementedError

where N is the number of non-blank solution lines and ``<indent>`` the indentation of the ``BEGIN`` marker. Every
cell loses its outputs and execution count; metadata (tags, kernelspec, ``fastpath.exercise``) and cell ids are kept,
so the two folders stay comparable cell by cell. The solution's jupytext pairing (``metadata.jupytext``: its
``solutions/exNN_*.py`` source) is dropped: an exercise has no text source, and saving it in JupyterLab writes only
the ``.ipynb``. A solution notebook without any marker is an error (it would make an exercise with nothing to do).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")


def stub_source(src: str) -> str:
    """``src`` with every solution block replaced by its stub (raises ``ValueError`` on unbalanced markers)."""
    out, block, indent = [], None, ""
    for line in src.splitlines():
        if block is None:
            m = BEGIN.match(line)
            if m:
                block, indent = [], m.group(1)
            elif END.match(line):
                raise ValueError("# END SOLUTION without # BEGIN SOLUTION")
            else:
                out.append(line)
        elif END.match(line):
            n = sum(bool(x.strip()) for x in block)
            plural = "s" if n != 1 else ""
            out += [f"{indent}# FILL ME IN (roughly {n} line{plural})", f"{indent}raise NotImplementedError"]
            block = None
        elif BEGIN.match(line):
            raise ValueError("nested # BEGIN SOLUTION")
        else:
            block.append(line)
    if block is not None:
        raise ValueError("# BEGIN SOLUTION without # END SOLUTION")
    return "\n".join(out)


def make_exercise(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The exercise notebook derived from a solution notebook."""
    nb = copy.deepcopy(solution)
    nb.metadata.pop("jupytext", None)  # exercises are not paired with a text source
    stubs = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            new = stub_source(cell.source)
            stubs += new != cell.source
            cell.source = new
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)
        else:
            cell.pop("attachments", None) if not cell.get("attachments") else None
    if not stubs:
        raise ValueError("no # BEGIN SOLUTION block: nothing for the learner to do")
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def build(src_dir: Path, dst_dir: Path) -> dict[Path, str]:
    """``{exercise path: text}`` for every ``exNN_*.ipynb`` in ``src_dir``."""
    out = {}
    for sol in sorted(src_dir.glob("ex[0-9][0-9]_*.ipynb")):
        try:
            nb = make_exercise(nbformat.read(sol, as_version=4))
        except ValueError as exc:
            raise SystemExit(f"{sol}: {exc}") from None
        out[dst_dir / sol.name] = render(nb)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="verify only; exit 1 with a diff when out of sync")
    ap.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    ap.add_argument("--exercises", type=Path, default=ROOT / "exercises")
    args = ap.parse_args(argv)
    wanted = build(args.solutions, args.exercises)
    if not wanted:
        print(f"no exNN_*.ipynb in {args.solutions}", file=sys.stderr)
        return 1
    if args.check:
        problems = []
        for path, text in wanted.items():
            have = path.read_text(encoding="utf-8") if path.exists() else None
            if have is None:
                problems.append(f"missing: {path}")
            elif have != text:
                diff = difflib.unified_diff(have.splitlines(), text.splitlines(), f"{path} (on disk)",
                                            f"{path} (from solutions)", lineterm="", n=2)
                problems.append("\n".join(list(diff)[:80]))
        extra = sorted(set(args.exercises.glob("ex[0-9][0-9]_*.ipynb")) - set(wanted))
        problems += [f"no solution for: {p}" for p in extra]
        if problems:
            print("exercises/ is out of sync with solutions/ (run python tools/make_exercises.py):\n")
            print("\n".join(problems))
            return 1
        print(f"exercises/ in sync with solutions/ ({len(wanted)} notebooks)")
        return 0
    args.exercises.mkdir(parents=True, exist_ok=True)
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
