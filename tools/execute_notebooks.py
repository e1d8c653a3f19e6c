"""Re-execute the lessons and solutions whose text source changed, saving their outputs into the ``.ipynb``.

    ./kit lessons                   # every pair whose .py source differs from its notebook (or was never executed)
    ./kit lessons --all             # every lesson and solution
    ./kit lessons notebooks/02_triton_kernel.py solutions/ex03_predicate.ipynb   # these (either file of a pair)
    ./kit lessons --list            # say which are stale and why; run nothing (exit 1 when any is)

(``./kit lessons`` is ``python tools/execute_notebooks.py``.) Each lesson ``notebooks/NN_*.ipynb`` and solution
``solutions/exNN_*.ipynb`` is paired by jupytext with a percent script beside it (``NN_*.py``): the script is the
source, the notebook holds the same cells plus their saved outputs. A pair is *stale* when the script's cells (type,
source, tags and other cell metadata) differ from the notebook's as jupytext reads them, when the notebook is missing,
or when one of its code cells was never executed. A stale pair is rebuilt from the script with the notebook's outputs
and cell ids carried over (jupytext's ``combine_inputs_with_outputs``: an edited cell keeps its id, a new cell gets a
new one), executed top to bottom in a fresh ``python3`` kernel whose working directory is the notebook's folder, and
saved; a notebook whose execution fails is not saved. When a solution was saved, ``exercises/`` is regenerated from
``solutions/`` (``tools/make_exercises.py``).

Kernels run with Triton's interpreter opted in where there is no CUDA device (``fastpath_lib.use_interpreter()``
sets ``TRITON_INTERPRET=1`` here and the kernel inherits it; the notebooks' first cell opts in too). ``PYTHONPATH``
starts with the repository root.

A notebook that differs from its script *and* is newer than it was edited without the pairing (outside JupyterLab's
jupytext contents manager): it is refused rather than overwritten. ``jupytext --sync PATH.ipynb`` takes the
notebook's cells into the script; ``--force`` takes the script's.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
from jupytext.combine import combine_inputs_with_outputs

ROOT = Path(__file__).resolve().parents[1]
#: How a notebook and its source are paired (in each notebook's metadata and in the script's header). The filter
#: keeps ``fastpath.exercise`` (the grader reads it) in the script and leaves jupytext's version out of its header.
PAIRING = {"formats": "ipynb,py:percent",
           "notebook_metadata_filter": "fastpath,-jupytext.text_representation.jupytext_version"}
TEXT_FORMAT = "py:percent"
#: Cell metadata that never enters the text source (jupytext's own list), so it is not compared either.
VOLATILE_CELL_METADATA = {"autoscroll", "collapsed", "scrolled", "trusted", "execution", "ExecuteTime"}
#: A notebook newer than its source by more than this (seconds) was edited without the pairing.
NEWER_MARGIN_S = 5.0


@dataclass(frozen=True)
class Pair:
    """A notebook and its paired percent script."""

    notebook: Path
    source: Path

    @property
    def name(self) -> str:
        try:
            return str(self.notebook.relative_to(ROOT))
        except ValueError:
            return str(self.notebook)


def pairs(root: Path = ROOT) -> list[Pair]:
    """Every lesson (``notebooks/NN_*``) and solution (``solutions/exNN_*``) found as a notebook or a script."""
    out = {}
    for folder, pattern in (("notebooks", "[0-9][0-9]_*"), ("solutions", "ex[0-9][0-9]_*")):
        for path in sorted((root / folder).glob(pattern)):
            if path.suffix in (".ipynb", ".py"):
                out.setdefault(path.with_suffix(""), Pair(path.with_suffix(".ipynb"), path.with_suffix(".py")))
    return [out[k] for k in sorted(out)]


def pair_of(path: Path) -> Pair:
    path = path.resolve()
    if path.suffix not in (".ipynb", ".py"):
        raise SystemExit(f"{path}: not a notebook (.ipynb) or its source (.py)")
    return Pair(path.with_suffix(".ipynb"), path.with_suffix(".py"))


def cell_key(cell) -> tuple:
    """What the text source holds of a cell: its type, source and (non-volatile) metadata."""
    meta = {k: v for k, v in cell.get("metadata", {}).items() if k not in VOLATILE_CELL_METADATA}
    return cell["cell_type"], cell["source"], meta


def differences(notebook, source) -> list[str]:
    """Where two notebooks' cells disagree (count, order, type, source, metadata); empty when they agree."""
    a, b = [cell_key(c) for c in notebook.cells], [cell_key(c) for c in source.cells]
    out = []
    if len(a) != len(b):
        out.append(f"{len(a)} cells in the notebook, {len(b)} in the source")
    matcher = difflib.SequenceMatcher(a=[k[:2] for k in a], b=[k[:2] for k in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if a[i][2] != b[j][2]:
                    out.append(f"cell {i} ({a[i][0]}): metadata {a[i][2]} in the notebook, {b[j][2]} in the source")
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if a[i][0] != b[j][0]:
                    out.append(f"cell {i}: a {a[i][0]} cell in the notebook, a {b[j][0]} cell in the source")
                else:
                    diff = difflib.unified_diff(a[i][1].splitlines(), b[j][1].splitlines(), "notebook", "source",
                                                lineterm="", n=1)
                    out.append(f"cell {i} ({a[i][0]}) differs:\n" + "\n".join(list(diff)[2:14]))
            continue
        for i in range(i1, i2):
            out.append(f"cell {i} ({a[i][0]}) only in the notebook: {a[i][1][:70]!r}")
        for j in range(j1, j2):
            out.append(f"source cell {j} ({b[j][0]}) not in the notebook: {b[j][1][:70]!r}")
    return out


def read_source(pair: Pair):
    return jupytext.read(pair.source)


def read_notebook(pair: Pair):
    return nbformat.read(pair.notebook, as_version=4)


def unexecuted(nb) -> list[int]:
    """Indices of code cells with source that carry no execution count (never run, or cleared)."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()
            and c.get("execution_count") is None]


def status(pair: Pair) -> tuple[str, list[str]]:
    """``("ok" | "stale" | "refused" | "error", reasons)`` for one pair (see the module docstring)."""
    if not pair.source.exists():
        return "error", [f"no text source {pair.source.name}: pair it with "
                         f"`jupytext --set-formats {PAIRING['formats']} {pair.notebook.name}`"]
    if not pair.notebook.exists():
        return "stale", ["no notebook yet"]
    nb, src = read_notebook(pair), read_source(pair)
    diff = differences(nb, src)
    if diff:
        if pair.notebook.stat().st_mtime > pair.source.stat().st_mtime + NEWER_MARGIN_S:
            return "refused", [f"{pair.notebook.name} is newer than {pair.source.name} and differs from it (edited "
                               f"without the pairing?): `jupytext --sync {pair.notebook.name}` keeps the notebook's "
                               f"cells, --force keeps the source's"] + diff
        return "stale", diff
    cells = unexecuted(nb)
    if cells:
        return "stale", [f"code cells never executed: {cells}"]
    return "ok", []


def merged(pair: Pair):
    """The notebook to execute: the source's cells, with the saved notebook's ids, outputs and metadata."""
    src = read_source(pair)
    if pair.notebook.exists():
        nb = combine_inputs_with_outputs(src, read_notebook(pair), fmt=TEXT_FORMAT)
    else:
        nb = src
    nb.metadata.setdefault("jupytext", {}).update(PAIRING)
    nb.metadata["jupytext"].pop("text_representation", None)
    seen = set()
    for cell in nb.cells:
        if cell.get("id") in seen or not cell.get("id"):
            cell["id"] = nbformat.v4.new_code_cell().id  # a fresh, valid id (only for a duplicate or a missing one)
        seen.add(cell["id"])
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(nb)
    return nb


def kernel_env() -> dict[str, str]:
    """The kernel's environment: the interpreter opted in where there is no CUDA, the repo first on PYTHONPATH."""
    sys.path.insert(0, str(ROOT))
    import fastpath_lib

    fastpath_lib.use_interpreter()  # sets TRITON_INTERPRET=1 in os.environ without CUDA; nothing on a CUDA machine
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *rest])
    return env


def execute(pair: Pair, timeout: int = 300, env: dict[str, str] | None = None) -> float:
    """Rebuild ``pair.notebook`` from its source, execute it, save it; returns the wall time (raises on errors)."""
    from nbclient import NotebookClient

    nb = merged(pair)
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(pair.notebook.parent)}})
    client.execute(env=env if env is not None else kernel_env())
    elapsed = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, pair.notebook)
    os.utime(pair.source)  # the source stays the newer file of the pair (what jupytext's contents manager expects)
    return elapsed


def regenerate_exercises(root: Path = ROOT) -> None:
    spec = importlib.util.spec_from_file_location("make_exercises", ROOT / "tools" / "make_exercises.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--solutions", str(root / "solutions"), "--exercises", str(root / "exercises")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, help="notebooks or sources to execute (default: the stale ones)")
    ap.add_argument("--all", action="store_true", help="execute every lesson and solution")
    ap.add_argument("--list", action="store_true", help="only list the stale pairs (exit 1 when any)")
    ap.add_argument("--force", action="store_true", help="take the source even where the notebook is newer")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    ap.add_argument("--root", type=Path, default=ROOT, help="the kit folder holding notebooks/ and solutions/")
    args = ap.parse_args(argv)

    todo, refused, errors = [], [], []
    candidates = [pair_of(p) for p in args.paths] if args.paths else pairs(args.root.resolve())
    for pair in candidates:
        state, reasons = status(pair)
        if state == "error":
            errors.append(pair)
        elif state == "refused" and not args.force:
            refused.append(pair)
        elif state != "ok" or args.all or args.paths:
            todo.append(pair)
        if state != "ok":
            print(f"{pair.name}: {state}" + "".join(f"\n  {line}" for r in reasons for line in r.splitlines()))
    if args.list:
        print(f"{len(todo)} to execute" + (f", {len(refused)} refused" if refused else ""))
        return 1 if todo or refused or errors else 0
    if not todo:
        print("nothing to execute: every notebook agrees with its source (--all executes them anyway)")
    env = kernel_env() if todo else {}
    failed, total, solutions = [], 0.0, False
    for pair in todo:
        print(f"{pair.name}: executing...", flush=True)
        try:
            t = execute(pair, args.timeout, env)
        except Exception as exc:  # a failing cell: report it, keep the saved notebook, go on with the others
            failed.append(pair)
            print(f"{pair.name}: FAILED, not saved\n{exc}", flush=True)
            continue
        total += t
        solutions |= pair.notebook.parent.name == "solutions"
        print(f"{pair.name}: {t:.1f} s, saved", flush=True)
    if todo:
        print(f"total: {total:.1f} s")
    if solutions:
        regenerate_exercises(args.root.resolve())
    return 1 if failed or refused or errors else 0


if __name__ == "__main__":
    sys.exit(main())
