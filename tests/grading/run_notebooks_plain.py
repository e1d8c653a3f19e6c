"""Run exercise notebooks in this one process, each in a namespace of its own, and call each check cell's checks with
``show=False``, as a notebook kernel would: a JSON list of ``{"path", "results", "cell_errors"}`` on stdout.

For checks whose outcome does not depend on the sandbox (an untouched exercise scores zero): one process for every
notebook instead of one kernel each. Cell sources are registered with ``linecache`` as IPython does, so a check that
reads a function's source finds it."""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import sys

import nbformat

from fastpath_lib import exercises
from fastpath_lib.grading.engine.notebook import CHECK_TAG, calls


def run(path: str) -> dict:
    nb = nbformat.read(path, as_version=4)
    ns: dict = {"__name__": "__main__"}
    results, errors = [], []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if CHECK_TAG in cell.get("metadata", {}).get("tags", []):
            for name, args, kwargs in calls(cell.source):
                named = "".join(f", {k}={v}" for k, v in kwargs)
                source = f"__check({args}{named}, show=False)" if args else f"__check(show=False{named})"
                try:
                    got = eval(source, {**ns, "__check": getattr(exercises, name)})  # noqa: S307 - the kit's own cells
                    results += [r.to_dict() for r in got or []]
                except Exception as exc:  # noqa: BLE001 - reported, as the grader reports a check that cannot run
                    results.append({"check": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        name = f"<{path} cell {index}>"
        linecache.cache[name] = (len(cell.source), None, cell.source.splitlines(True), name)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(cell.source, name, "exec"), ns)  # noqa: S102 - the kit's own notebooks
        except Exception as exc:  # noqa: BLE001 - a FILL ME IN cell may raise; the kernel goes on, so does this
            errors.append(f"cell {index}: {type(exc).__name__}: {exc}")
    return {"path": path, "results": results, "cell_errors": errors}


if __name__ == "__main__":
    print(json.dumps([run(p) for p in sys.argv[1:]]))
