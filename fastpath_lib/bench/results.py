"""Results folders: written atomically, never silently overwritten, and found again by :func:`latest_gpu_results`.

A folder holds ``results.csv`` (one row per case and provider), ``environment.json`` and the analyses. While a run is
in progress it lives in a hidden sibling ``.<name>.partial-<pid>`` containing an ``INCOMPLETE`` marker; only a
finished run is renamed to its final name, so Ctrl-C never leaves a folder that looks complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd

__all__ = ["INCOMPLETE_MARKER", "begin", "write", "finish", "load_results", "latest_gpu_results"]

INCOMPLETE_MARKER = "INCOMPLETE"


def begin(out_dir: str | Path, *, force: bool = False) -> Path:
    """Create the staging folder for ``out_dir``.

    Args:
        out_dir: the final results folder.
        force: allow replacing an existing ``out_dir`` (only once the new run has finished).

    Returns:
        the staging folder (with an ``INCOMPLETE`` marker).

    Raises:
        FileExistsError: ``out_dir`` exists and ``force`` is false.
    """
    out = Path(out_dir)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force (force=True) to replace it, or choose another "
                              f"folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    (staging / INCOMPLETE_MARKER).write_text("run in progress or interrupted; these results are not complete\n")
    return staging


def write(folder: Path, df: pd.DataFrame, env: dict) -> None:
    """Write ``results.csv``, ``environment.json`` and the boundary plot/table into ``folder``."""
    from fastpath_lib.bench import analysis
    from fastpath_lib.bench.harness import CSV_COLUMNS

    cols = CSV_COLUMNS + [c for c in df.columns if c not in CSV_COLUMNS]
    df.to_csv(folder / "results.csv", index=False, columns=cols)
    (folder / "environment.json").write_text(json.dumps(env, indent=2, default=str) + "\n")
    fig = analysis.boundary_plot(df, env=env)
    fig.savefig(folder / "boundary.png", dpi=110)
    analysis.boundary_table(df).to_csv(folder / "boundary.csv", index=False)


def finish(staging: Path, out_dir: str | Path, *, force: bool = False) -> Path:
    """Remove the marker and rename the staging folder to ``out_dir`` (replacing it only with ``force``)."""
    out = Path(out_dir)
    (staging / INCOMPLETE_MARKER).unlink()
    if out.exists():
        if not force:
            raise FileExistsError(f"{out} appeared during the run; results left in {staging}")
        shutil.rmtree(out)
    staging.rename(out)
    return out


def load_results(results_dir: str | Path) -> tuple[pd.DataFrame, dict]:
    """Read a results folder.

    Args:
        results_dir: a folder written by :func:`fastpath_lib.bench.run_matrix`.

    Returns:
        ``(classified DataFrame, environment dict)``.

    Raises:
        ValueError: the folder carries an ``INCOMPLETE`` marker.
        FileNotFoundError: ``results.csv`` or ``environment.json`` is missing.
    """
    from fastpath_lib.bench.analysis import classify

    d = Path(results_dir)
    if (d / INCOMPLETE_MARKER).exists():
        raise ValueError(f"{d} is marked {INCOMPLETE_MARKER}: the run did not finish")
    df = pd.read_csv(d / "results.csv", keep_default_na=True)
    env = json.loads((d / "environment.json").read_text())
    df = classify(df)
    df.attrs["environment"] = env
    return df, env


def latest_gpu_results(root: str | Path = "results") -> Path | None:
    """The newest complete results folder under ``root`` whose ``environment.json`` says ``gpu_measurement: true``.

    Args:
        root: where results folders live (``results/<device>-<date>/``).

    Returns:
        the folder, or ``None`` when no GPU measurement has been recorded.

    Note:
        CPU / interpreter runs are never returned, however recent.
    """
    best = None
    rootp = Path(root)
    if not rootp.is_dir():
        return None
    for envf in rootp.glob("*/environment.json"):
        folder = envf.parent
        if folder.name.startswith(".") or (folder / INCOMPLETE_MARKER).exists():
            continue
        try:
            env = json.loads(envf.read_text())
        except (OSError, ValueError):
            continue
        if env.get("gpu_measurement") is True and not env.get("synthetic"):
            key = (str(env.get("timestamp", "")), folder.name)
            if best is None or key > best[0]:
                best = (key, folder)
    return None if best is None else best[1]
