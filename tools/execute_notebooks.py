"""Re-execute lesson notebooks in place with nbclient (run after any change to the library or the lessons).

    python tools/execute_notebooks.py                       # every notebooks/*.ipynb
    python tools/execute_notebooks.py notebooks/02_*.ipynb  # some of them

Kernel ``python3``, working directory ``notebooks/``, ``PYTHONPATH`` set to the repository root, a timeout per cell.
Prints each notebook's wall time; exits non-zero if a cell raises.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path, timeout: int = 300) -> float:
    nb = nbformat.read(path, as_version=4)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + env_path if env_path and env_path != str(ROOT) else "")
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
                   ).execute()
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    total = 0.0
    for p in paths:
        t = execute(p.resolve(), args.timeout)
        total += t
        print(f"{p.name}: {t:.1f} s", flush=True)
    print(f"total: {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
