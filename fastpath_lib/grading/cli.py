"""``python -m fastpath_lib grade PATH... [--json] [--timeout S]``: execute exercise notebooks and score them.

Each notebook is copied into a temporary folder and executed there in a fresh ``python3`` kernel (nbclient), with
``allow_errors`` so that one failing cell does not stop later parts from being graded, and with a deadline for the
whole notebook. The graded files are only read, never written. Every check in :mod:`fastpath_lib.exercises` displays
its result with a JSON copy (MIME :data:`~fastpath_lib.grading.registry.MIME`); the grader collects those from the
outputs and lists every registered part of the notebook's exercise, so a part whose check never ran is reported as
failed ("check did not run"), with the first error of the notebook when there was one.

Exit status: 0 when every graded part passed, 1 when some did not, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastpath_lib.grading.registry import EXERCISES, MIME, TITLES

__all__ = ["main", "grade_notebook", "NotebookGrade"]

DEFAULT_TIMEOUT = 300


@dataclasses.dataclass
class PartGrade:
    exercise: str
    part: str
    points: int
    earned: int
    passed: bool
    feedback: str


@dataclasses.dataclass
class NotebookGrade:
    path: str
    exercise: str | None
    status: str  # "ok", "errors", "timeout", "unreadable", "unknown exercise", "kernel died"
    reason: str
    seconds: float
    parts: list[PartGrade]

    @property
    def earned(self) -> int:
        return sum(p.earned for p in self.parts)

    @property
    def points(self) -> int:
        return sum(p.points for p in self.parts)


def _exercise_id(nb, path: Path) -> str | None:
    meta = (nb.get("metadata", {}) if nb is not None else {}).get("fastpath", {}) if nb is not None else {}
    ex = meta.get("exercise") if isinstance(meta, dict) else None
    if ex in EXERCISES:
        return ex
    m = re.match(r"(ex\d\d)", path.name)
    return m.group(1) if m and m.group(1) in EXERCISES else None


def _kernel_env() -> dict:
    root = str(Path(__file__).resolve().parents[2])  # the folder holding fastpath_lib/
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def _execute(nb, workdir: str, timeout: float, kernel_name: str) -> tuple[str, str]:
    """Run every code cell with a deadline for the whole notebook; returns ``(status, reason)``."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    client = NotebookClient(nb, timeout=int(timeout), kernel_name=kernel_name, allow_errors=True,
                            interrupt_on_timeout=False, resources={"metadata": {"path": workdir}},
                            record_timing=False)
    deadline = time.monotonic() + timeout
    status, reason = "ok", ""
    try:
        with client.setup_kernel(env=_kernel_env(), stderr=subprocess.DEVNULL):  # kernel chatter, not the learner
            for index, cell in enumerate(nb.cells):
                if cell.get("cell_type") != "code":
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout", f"notebook ran past its {timeout:g} s limit before cell {index}"
                client.timeout = max(1, int(remaining))
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    return "timeout", f"cell {index} ran past the notebook's {timeout:g} s limit"
                except DeadKernelError as exc:
                    return "kernel died", f"the kernel died in cell {index}: {exc}"
    except (CellTimeoutError, DeadKernelError) as exc:  # raised while starting or cleaning up
        return "kernel died", str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return status, reason


def _first_error(nb) -> str:
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") == "error":
                return f"cell {index} raised {out.get('ename')}: {str(out.get('evalue', ''))[:200]}"
    return ""


def _collect(nb, exercise: str) -> dict[str, dict]:
    found = {}
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {}) if out.get("output_type") in ("display_data", "execute_result") else {}
            res = data.get(MIME)
            if isinstance(res, str):
                try:
                    res = json.loads(res)
                except ValueError:
                    res = None
            if isinstance(res, dict) and res.get("exercise") == exercise:
                found[str(res.get("part"))] = res
    return found


def grade_notebook(path: str | Path, *, timeout: float = DEFAULT_TIMEOUT,
                   kernel_name: str = "python3") -> NotebookGrade:
    """Execute a copy of one notebook and grade it; never raises for a broken notebook."""
    import nbformat

    path = Path(path)
    t0 = time.monotonic()
    try:
        raw = path.read_bytes()
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as exc:  # noqa: BLE001
        ex = _exercise_id(None, path)
        reason = f"could not read notebook: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return NotebookGrade(str(path), ex, "unreadable", reason, 0.0, _missing(ex, reason))
    ex = _exercise_id(nb, path)
    if ex is None:
        reason = "not an exercise notebook (no metadata.fastpath.exercise and no exNN_ file name)"
        return NotebookGrade(str(path), None, "unknown exercise", reason, 0.0, [])
    for cell in nb.cells:  # saved outputs must never count: only what runs now is graded
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    with tempfile.TemporaryDirectory(prefix="fastpath-grade-") as tmp:
        for extra in path.parent.glob("*"):  # data files next to the notebook travel with the copy
            if extra.is_file() and extra.suffix != ".ipynb" and extra.stat().st_size < 8 * 1024 * 1024:
                shutil.copy2(extra, tmp)
        copy = Path(tmp) / path.name
        copy.write_bytes(raw)
        try:
            status, reason = _execute(nb, tmp, timeout, kernel_name)
        except Exception as exc:  # noqa: BLE001 - e.g. no such kernel
            status, reason = "errors", f"could not execute: {type(exc).__name__}: {exc}"
    err = _first_error(nb)
    if status == "ok" and err:
        status, reason = "errors", err
    found = _collect(nb, ex)
    parts = []
    for name, pts in EXERCISES[ex]:
        res = found.get(name)
        if res is None:
            why = "check did not run" + (f" ({reason})" if reason else "")
            parts.append(PartGrade(ex, name, pts, 0, False, why))
        else:
            ok = bool(res.get("passed"))
            parts.append(PartGrade(ex, name, pts, pts if ok else 0, ok, str(res.get("feedback", ""))))
    return NotebookGrade(str(path), ex, status, reason, round(time.monotonic() - t0, 1), parts)


def _missing(ex, reason):
    if ex is None:
        return []
    return [PartGrade(ex, n, p, 0, False, reason) for n, p in EXERCISES[ex]]


def _expand(paths: list[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.glob("*.ipynb") if re.match(r"ex\d\d", q.name))
        else:
            out.append(p)
    return out


def _first_line(text: str, width: int = 70) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _print_table(grades: list[NotebookGrade], verbose: bool) -> None:
    rows = [("exercise", "part", "points", "passed", "feedback")]
    for g in grades:
        if not g.parts:
            rows.append((Path(g.path).name, "-", "0/0", "no", _first_line(g.reason)))
        for p in g.parts:
            rows.append((p.exercise, p.part, f"{p.earned}/{p.points}", "yes" if p.passed else "no",
                         _first_line(p.feedback)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 8)
    print()
    for g in grades:
        title = TITLES.get(g.exercise or "", "")
        status = g.status + (f": {g.reason}" if g.reason else "")
        print(f"{Path(g.path).name}: {g.earned}/{g.points} ({title}; {g.seconds:.1f} s; {status})")
        if verbose:
            for p in g.parts:
                if not p.passed and "\n" in p.feedback:
                    print(f"  {p.part}:\n" + "\n".join("    " + x for x in p.feedback.splitlines()))
    total, maximum = sum(g.earned for g in grades), sum(g.points for g in grades)
    print(f"score: {total}/{maximum}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m fastpath_lib grade``."""
    ap = argparse.ArgumentParser(prog="python -m fastpath_lib grade",
                                 description="Execute exercise notebooks (on a copy, in a fresh kernel) and score "
                                             "them. A folder means its exNN_*.ipynb notebooks.")
    ap.add_argument("paths", nargs="+", help="notebooks or folders")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                    help=f"seconds per notebook (default {DEFAULT_TIMEOUT})")
    ap.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the full feedback of failed parts")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    notebooks = _expand(args.paths)
    missing = [str(p) for p in notebooks if not p.exists()]
    if missing or not notebooks:
        print(f"grade: no such notebook(s): {', '.join(missing) or ' '.join(args.paths)}", file=sys.stderr)
        return 2
    grades = [grade_notebook(p, timeout=args.timeout, kernel_name=args.kernel) for p in notebooks]
    total, maximum = sum(g.earned for g in grades), sum(g.points for g in grades)
    if args.json:
        print(json.dumps({"score": total, "max": maximum,
                          "notebooks": [{**{k: v for k, v in dataclasses.asdict(g).items() if k != "parts"},
                                         "earned": g.earned, "points": g.points,
                                         "parts": [dataclasses.asdict(p) for p in g.parts]} for g in grades]},
                         indent=2))
    else:
        _print_table(grades, args.verbose)
    return 0 if total == maximum else 1


if __name__ == "__main__":
    sys.exit(main())
