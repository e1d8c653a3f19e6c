"""The grader's view of an exercise notebook: its distributed check cells, restored, and what its code touches.

The check cells of an exercise are the cells tagged :data:`CHECK_TAG` (each calls ``ex.check_*`` on the learner's
functions) of the grader's own copy of the notebook (:func:`original_for`): ``check-cells/exNN_*.ipynb`` in a course
release's autograder (``python -m fastpath_lib release``), else ``solutions/exNN_*.ipynb`` in the kit's checkout. As
nbgrader does with its read-only cells, the grader puts them back as distributed, matched by cell id (in a notebook
saved without ids, by the checks they call): an edited check cell gets its original source, a deleted one is
inserted again after the cell that preceded it. The grader then runs each check itself, in its own process, at that
place (:mod:`fastpath_lib.grading.engine.cli`), with the arguments of the *original* call.

:func:`static_evidence` reads the learner's own cells for code that replaces the kit's functions or state: an
assignment to an attribute of anything imported from ``fastpath_lib`` (``ex.check_reference = ...``), IPython event
hooks, ``sys.modules`` and builtins. What a cell does at run time without saying so in its source cannot change a
verdict: the checks never run in the learner's kernel.

>>> calls("ex.check_reference(my_reference)\\nx = 1")
[('check_reference', 'my_reference', [])]
"""

from __future__ import annotations

import ast
import copy
import re
import shutil
from pathlib import Path

from fastpath_lib import runtime
from fastpath_lib.grading.engine.sources import dotted, parse

__all__ = ["CHECK_TAG", "ROOT", "CHECK_CELLS", "ALL", "solution_for", "original_for", "check_cells", "restore", "calls",
           "static_evidence", "assignments", "DATA_FILE_LIMIT", "copy_data_files"]

CHECK_TAG = "grader-check"
#: The kit's checkout: ``solutions/`` holds the distributed check cells.
ROOT = runtime.ROOT
#: The folder of a course release's autograder that holds the released exercise notebooks, the grader's copy of their
#: check cells (:mod:`fastpath_lib.release` writes it; a checkout has none).
CHECK_CELLS = "check-cells"
#: Scope of evidence that affects every part of the notebook.
ALL = "*"
#: Builtins the grader's agent is started with in the notebook's namespace (``exec(compile(...))``): a notebook that
#: rebinds one stops the agent. Any other name of the builtins (``type``, ``print``, ``open``) is the learner's to use.
_HOOK_BUILTINS = {"exec", "compile", "__builtins__"}


def solution_for(exercise: str, root: Path = ROOT) -> Path | None:
    """``solutions/exNN_*.ipynb`` of the exercise, or ``None`` when the checkout has none."""
    found = sorted((root / "solutions").glob(f"{exercise}_*.ipynb"))
    return found[0] if found else None


def original_for(exercise: str, root: Path = ROOT) -> Path | None:
    """The grader's copy of the exercise's notebook, whose check cells it restores: ``check-cells/exNN_*.ipynb`` of a
    course release's autograder, else ``solutions/exNN_*.ipynb``; ``None`` when there is neither."""
    found = sorted((root / CHECK_CELLS).glob(f"{exercise}_*.ipynb"))
    return found[0] if found else solution_for(exercise, root)


def check_cells(nb) -> list:
    """The code cells tagged :data:`CHECK_TAG`, in order."""
    return [c for c in nb.cells if c.get("cell_type") == "code" and CHECK_TAG in c.get("metadata", {}).get("tags", [])]


def restore(nb, original) -> tuple[list[str], list[str]]:
    """Put ``original``'s check cells back into ``nb`` (in place); returns ``(their ids, notes for the report)``.

    Cells are matched by id. A notebook saved without cell ids (nbformat 4.4: Colab, older tools) or with new ones
    has its check cells found by what they call instead: the first cell, in order, without an id of ``original``
    that calls the same checks. A check cell found neither way is inserted after the cell that preceded it (found by
    id, else by its first line), or at the end.
    """
    notes, ids = [], []
    order = [c.get("id") for c in original.cells]
    known = set(order)
    by_id = {c.get("id"): i for i, c in enumerate(nb.cells)}
    cursor = 0  # where the last check cell went: matching by content goes on from there, in order
    for cell in check_cells(original):
        cid = cell.get("id")
        ids.append(cid)
        fresh = copy.deepcopy(cell)
        fresh["outputs"], fresh["execution_count"] = [], None
        at = by_id.get(cid)
        if at is None:
            at = _same_calls(nb, cell, known, cursor)
            if at is not None:
                notes.append(f"check cell {cid} had {'no id' if not nb.cells[at].get('id') else 'another id'}: "
                             f"found by its calls, restored")
        elif nb.cells[at].get("source") != cell.get("source") or nb.cells[at].get("cell_type") != "code":
            notes.append(f"check cell {cid} was edited: restored")
        if at is not None:
            nb.cells[at] = fresh
        else:
            notes.append(f"check cell {cid} was deleted: restored")
            at = len(nb.cells)
            for prev in reversed(order[:order.index(cid)]):
                j = by_id.get(prev)
                if j is None:
                    j = _same_first_line(nb, original.cells[order.index(prev)], known)
                if j is not None:
                    at = j + 1
                    break
            nb.cells.insert(at, fresh)
        cursor = at + 1
        by_id = {c.get("id"): i for i, c in enumerate(nb.cells) if c.get("id")}
    for c in nb.cells:  # a learner's own cell wearing the tag is an ordinary cell
        if c.get("id") not in ids and CHECK_TAG in c.get("metadata", {}).get("tags", []):
            c["metadata"]["tags"] = [t for t in c["metadata"]["tags"] if t != CHECK_TAG]
    return ids, notes


def _same_calls(nb, cell, known: set, start: int) -> int | None:
    """The first code cell of ``nb`` from ``start`` on (then from the top) without an id of the original notebook
    whose check calls are ``cell``'s."""
    want = [name for name, _, _ in calls(cell.get("source", ""))]
    order = list(range(start, len(nb.cells))) + list(range(0, min(start, len(nb.cells))))
    for i in order:
        c = nb.cells[i]
        if c.get("cell_type") == "code" and c.get("id") not in known and want \
                and [name for name, _, _ in calls(c.get("source", ""))] == want:
            return i
    return None


def _same_first_line(nb, cell, known: set) -> int | None:
    """The last cell of ``nb`` without an id of the original notebook whose first non-blank line is ``cell``'s."""
    def first(c):
        return next((line.strip() for line in c.get("source", "").splitlines() if line.strip()), "")

    line = first(cell)
    hits = [i for i, c in enumerate(nb.cells) if line and c.get("id") not in known and first(c) == line
            and c.get("cell_type") == cell.get("cell_type")]
    return hits[-1] if hits else None


def calls(source: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The ``ex.check_*(...)`` calls at the top level of a check cell: ``(check, positional args source,
    [(keyword, source)])``."""
    tree = parse(source)
    out = []
    for node in tree.body if tree else []:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr.startswith("check_"):
            args = ", ".join(ast.get_source_segment(source, a) for a in call.args)
            kws = [(k.arg, ast.get_source_segment(source, k.value)) for k in call.keywords if k.arg != "show"]
            out.append((call.func.attr, args, kws))
    return out


def _root(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node) -> str:
    """``a.b.c``, or the attributes of a chain rooted at a call or subscript (``get_ipython().events``: ``events``)."""
    return dotted(node, partial=True)


def _kit_names(trees) -> set[str]:
    names = {"fastpath_lib"}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update((a.asname or a.name.split(".")[0]) for a in node.names
                             if a.name.startswith("fastpath_lib"))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fastpath_lib"):
                names.update((a.asname or a.name) for a in node.names)
    return names


#: A path that reaches the kit's ``solutions/`` folder: a slash beside the name (no spaces: prose that mentions the
#: folder is not a path, and neither is the bare word, a learner's column or key called "solutions").
_SOLUTIONS_PATH = re.compile(r"\S*/solutions(?:/\S*)?|solutions/\S*")


def _imported_roots(node) -> set[str]:
    """The top-level modules an ``import`` or ``from ... import`` statement names (empty for any other node)."""
    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {(node.module or "").split(".")[0]} | {a.name.split(".")[0] for a in node.names}
    return set()


def _solution_modules() -> set[str]:
    """The module names of the kit's published solutions (``solutions/exNN_*.py``)."""
    return {f.stem for f in (runtime.ROOT / "solutions").glob("ex[0-9][0-9]_*.py")}


def static_evidence(sources: list[str]) -> list[tuple[str, str]]:
    """``(scope, what)`` for each place the learner's code replaces the kit's functions or state; ``scope`` is the
    check it affects (``check_*``) or :data:`ALL`."""
    trees = [t for t in map(parse, sources) if t is not None]
    kit = _kit_names(trees)
    out: list[tuple[str, str]] = []

    def flag_target(t, verb):
        if isinstance(t, ast.Attribute) and _root(t) in kit:
            out.append((t.attr if t.attr.startswith("check_") else ALL, f"{verb} {_dotted(t)}"))
        elif isinstance(t, (ast.Subscript, ast.Attribute)) and "sys.modules" in _dotted(getattr(t, "value", t)) + \
                "." + _dotted(t):
            out.append((ALL, f"{verb} an entry of sys.modules"))
        elif isinstance(t, ast.Name) and t.id in _HOOK_BUILTINS:
            out.append((ALL, f"{verb} the builtin {t.id}"))
        elif isinstance(t, ast.Attribute) and _root(t) in ("builtins", "__builtins__"):
            out.append((ALL, f"{verb} {_dotted(t)}"))

    published = _solution_modules()
    for tree in trees:
        for node in ast.walk(tree):
            if _imported_roots(node) & published:
                out.append((ALL, "imports the kit's published solution"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and _SOLUTIONS_PATH.fullmatch(node.value):
                out.append((ALL, f"names the kit's solutions folder ({node.value!r})"))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in _HOOK_BUILTINS:
                out.append((ALL, f"defines its own {node.name}"))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                out += [(ALL, f"imports a name over the builtin {a.asname}") for a in node.names
                        if a.asname in _HOOK_BUILTINS]
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for t in targets:
                    for sub in ast.walk(t) if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                        flag_target(sub, "deletes" if isinstance(node, ast.Delete) else "assigns")
            elif isinstance(node, ast.Call):
                name = _dotted(node.func)
                if name in ("setattr", "delattr") and node.args and _root(node.args[0]) in kit | {"builtins"}:
                    attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else ""
                    scope = attr if isinstance(attr, str) and attr.startswith("check_") else ALL
                    out.append((scope, f"{name}() on {_dotted(node.args[0]) or 'a kit object'}"))
                elif name.endswith(("events.register", "events.unregister", "register_post_execute")):
                    out.append((ALL, "registers an IPython event hook"))
                elif name.startswith("sys.modules.") or name in ("sys.modules.__setitem__",):
                    out.append((ALL, f"calls {name}()"))
            elif isinstance(node, ast.Attribute) and node.attr == "callbacks" and _dotted(node).endswith(
                    "events.callbacks"):
                out.append((ALL, "touches IPython's event callbacks"))
    return list(dict.fromkeys(out))


def assignments(sources: list[str], name: str) -> int:
    """How many times the learner's cells bind ``name`` at the top level (``OP_NAME`` must be bound once)."""
    n = 0
    for tree in filter(None, map(parse, sources)):
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                n += sum(isinstance(t, ast.Name) and t.id == name for t in targets)
    return n


#: a data file beside a notebook of this size or more stays out of its working copy (the report names it)
DATA_FILE_LIMIT = 8 * 1024 * 1024


def copy_data_files(folder: Path, into: Path) -> list[str]:
    """Copy the data files beside a notebook (``folder``'s plain files, other notebooks aside) into its working copy's
    folder ``into``; a link (it could name another learner's file) and a file of :data:`DATA_FILE_LIMIT` or more stay
    behind, each named in the returned notes."""
    notes = []
    for extra in sorted(folder.glob("*")):
        if extra.suffix == ".ipynb" or not (extra.is_file() or extra.is_symlink()):
            continue
        if extra.is_symlink():
            notes.append(f"{extra.name} was not copied beside the graded notebook: it is a link")
        elif extra.stat().st_size >= DATA_FILE_LIMIT:
            size = extra.stat().st_size / 2 ** 20
            notes.append(f"{extra.name} was not copied beside the graded notebook: it holds {size:.1f} MiB, over "
                         f"the grader's {DATA_FILE_LIMIT >> 20} MiB limit")
        else:
            shutil.copy2(extra, into)
    return notes
