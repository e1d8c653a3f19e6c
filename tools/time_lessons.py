"""Time a cold run of each lesson, for the times the lessons state (``docs/lesson_times.json``).

    python tools/time_lessons.py                        # every lesson, one after another
    python tools/time_lessons.py notebooks/04_boundary_tests.ipynb   # these (the others keep their record)

Each lesson runs top to bottom in a fresh ``python3`` kernel, as ``./kit lessons`` runs it (the interpreter opted in
without CUDA), with empty Triton, Inductor and mypy caches and an empty temporary directory (``TMPDIR``: what a
lesson keeps under ``tempfile.gettempdir()``, lesson 09's vLLM tree and mypy cache, starts empty), as a learner's
first run, and nothing is saved into the notebook. The record keeps, per lesson: the digest of the code it ran
(:func:`code_digest`), the wall seconds, the kernel's CPU seconds (user + system, its children included: on a busy
machine the wall time grows and the CPU time much less), the slowest cells, the words a reader reads (markdown,
code, saved output as :func:`output_words` counts it: a rendered Markdown output by its text in sight) and the
machine's one-minute load when the run started. Run it on a quiet machine, one lesson at a time;
``tests/course/test_course.py`` checks each lesson's stated time against the record, and that each
lesson's code is still the code its run ran (a lesson whose code changed is run again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "lesson_times.json"


_FOLDED = re.compile(r"<details>.*?</details>", re.S | re.I)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_OBJECT_REPR = re.compile(r"^<[\w.]+ object(?: at 0x[0-9a-f]+)?>$")


def _rendered_words(text: str) -> int:
    """Words in sight in rendered Markdown or HTML: a folded ``<details>`` block counts its summary only, tags and
    markup (table bars, rules) count nothing."""
    text = _FOLDED.sub(lambda m: " ".join(_SUMMARY.findall(m.group(0))), text)
    return sum(any(ch.isalnum() for ch in w) for w in _TAG.sub(" ", text).split())


def output_words(output: dict) -> int:
    """The words a reader reads in one saved output: a stream's text; a rendered Markdown output's text in sight; an
    HTML output's text where its plain form is only an object's repr (``<IPython.core.display.HTML object>``); else
    the plain text (a table's, a value's)."""
    if "text" in output:
        return len("".join(output["text"]).split())
    data = output.get("data", {})
    plain = "".join(data.get("text/plain", ""))
    if "text/markdown" in data:
        return _rendered_words("".join(data["text/markdown"]))
    if "text/html" in data and (not plain or _OBJECT_REPR.match(plain.strip())):
        return _rendered_words("".join(data["text/html"]))
    return len(plain.split())


def words(nb) -> dict[str, int]:
    """The words a reader reads in ``nb``: its markdown, its code, and its saved output (:func:`output_words`)."""
    out = {"markdown": 0, "code": 0, "output": 0}
    for cell in nb.cells:
        out[cell.cell_type if cell.cell_type in out else "markdown"] += len(cell.source.split())
        out["output"] += sum(output_words(o) for o in cell.get("outputs", []))
    return out


def code_digest(nb) -> str:
    """What a cold run of ``nb`` depends on in the notebook: its code cells' sources, in order (SHA-256, hex).

    Markdown and saved outputs are left out: they change the reading time, which is computed from the notebook as it
    is, not the run.
    """
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode())
            h.update(b"\0")
    return h.hexdigest()


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_lesson(path: Path) -> dict:
    """Run ``path`` (a lesson notebook) cold, unsaved; its record."""
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT / "tools"))
    from execute_notebooks import kernel_env

    saved = nbformat.read(path, as_version=4)
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="lesson-times-") as tmp:
        env = kernel_env()
        for var, sub in (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                         ("MYPY_CACHE_DIR", "mypy"), ("TMPDIR", "tmp")):
            env[var] = str(Path(tmp) / sub)
        (Path(tmp) / "tmp").mkdir()  # what a lesson keeps under tempfile.gettempdir() starts empty
        load = os.getloadavg()[0]
        cpu0, t0 = _children_cpu(), time.perf_counter()
        client = NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=True,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute(env=env)
        wall = time.perf_counter() - t0
        cpu = _children_cpu() - cpu0
    cells = []
    for i, cell in enumerate(nb.cells):
        ex = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            start, end = (datetime.fromisoformat(ex[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))
            cells.append((i, round((end - start).total_seconds(), 1)))
    return {"code_digest": code_digest(saved), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_1min": round(load, 2),
            "slowest_cells": sorted(cells, key=lambda c: -c[1])[:3], "words": words(saved),
            "measured": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, help="lesson notebooks (default: every lesson)")
    args = ap.parse_args(argv)
    paths = [p.resolve().with_suffix(".ipynb") for p in args.paths] or \
        sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"lessons": {}}
    for path in paths:
        entry = time_lesson(path)
        record["lessons"][path.stem] = entry
        record["lessons"] = dict(sorted(record["lessons"].items()))
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{path.stem}: {entry['wall_s']} s wall, {entry['cpu_s']} s CPU (load {entry['load_1min']})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
