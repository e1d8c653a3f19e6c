"""Results folders: written atomically, never silently overwritten, read back with clear errors, found again.

A folder holds ``results.csv`` (one row per case and provider, :data:`~fastpath_lib.bench.schema.CSV_COLUMNS`),
``environment.json`` and the analyses. While a run is in progress it lives in a hidden sibling
``.<name>.partial-<pid>`` containing an ``INCOMPLETE`` marker; only a finished run is renamed to its final name, so
Ctrl-C never leaves a folder that looks complete. The next run for the same folder finds a staging folder left by
an interrupted run: it removes it and says so, or, for an evidence run (which holds GPU measurements), keeps it and
says where it is.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from fastpath_lib.bench.analysis import boundary_table, classify
from fastpath_lib.bench.plot import boundary_plot
from fastpath_lib.bench.schema import CSV_COLUMNS, matrix_rows

__all__ = ["INCOMPLETE_MARKER", "begin", "stale_staging", "write", "write_table", "finish", "load_results",
           "latest_gpu_results"]

INCOMPLETE_MARKER = "INCOMPLETE"
_REQUIRED = ("case_id", "provider", "status", "median_us")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def stale_staging(out_dir: str | Path) -> list[Path]:
    """Staging folders of ``out_dir`` left behind by runs that are no longer alive."""
    out = Path(out_dir)
    found = []
    for p in sorted(out.parent.glob(f".{out.name}.partial-*")) if out.parent.is_dir() else []:
        pid = p.name.rsplit("-", 1)[-1]
        if p.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            found.append(p)
    return found


def begin(out_dir: str | Path, *, force: bool = False, log=None) -> Path:
    """Create the staging folder for ``out_dir``, dealing first with staging folders of interrupted runs.

    Args:
        out_dir: the final results folder.
        force: allow replacing an existing ``out_dir`` (only once the new run has finished).
        log: ``callable(str)`` for the line about a stale staging folder (default: stderr).

    Returns:
        the staging folder (with an ``INCOMPLETE`` marker).

    Raises:
        FileExistsError: ``out_dir`` exists and ``force`` is false.
    """
    log = log or (lambda m: print(m, file=sys.stderr, flush=True))
    out = Path(out_dir)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force (force=True) to replace it, or choose another "
                              f"folder")
    for old in stale_staging(out):
        if (old / "manifest.json").exists():
            log(f"note: {old} holds an interrupted evidence run (kept: it may hold GPU measurements; read its "
                f"manifest.json, then delete it)")
        else:
            shutil.rmtree(old, ignore_errors=True)
            log(f"note: removed {old}, the staging folder of an interrupted run")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    (staging / INCOMPLETE_MARKER).write_text("run in progress or interrupted; these results are not complete\n")
    return staging


def write_table(folder: Path, df: pd.DataFrame) -> None:
    """Write ``results.csv`` (schema columns first, in order), atomically (a temporary file renamed)."""
    cols = CSV_COLUMNS + [c for c in df.columns if c not in CSV_COLUMNS]
    tmp = folder / ".results.csv.tmp"
    df.reindex(columns=cols).to_csv(tmp, index=False)
    tmp.replace(folder / "results.csv")


def write(folder: Path, df: pd.DataFrame, env: dict) -> None:
    """Write ``results.csv``, ``environment.json`` and, when the matrix ran, the boundary plot and table."""
    write_table(folder, df)
    (folder / "environment.json").write_text(json.dumps(env, indent=2, default=str) + "\n")
    if len(matrix_rows(df)):
        fig = boundary_plot(df, env=env)
        fig.savefig(folder / "boundary.png", dpi=110)
        boundary_table(df).to_csv(folder / "boundary.csv", index=False)


def finish(staging: Path, out_dir: str | Path, *, force: bool = False) -> Path:
    """Remove the marker and rename the staging folder to ``out_dir`` (replacing it only with ``force``)."""
    out = Path(out_dir)
    (staging / INCOMPLETE_MARKER).unlink(missing_ok=True)
    if out.exists():
        if not force:
            raise FileExistsError(f"{out} appeared during the run; results left in {staging}")
        shutil.rmtree(out)
    staging.rename(out)
    return out


def load_results(results_dir: str | Path, *, allow_incomplete: bool = False) -> tuple[pd.DataFrame, dict]:
    """Read a results folder.

    Args:
        results_dir: a folder written by :func:`fastpath_lib.bench.run_matrix` or the evidence command.
        allow_incomplete: read a staging folder still marked ``INCOMPLETE`` (the evidence command's PR note step).

    Returns:
        ``(classified DataFrame, environment dict)``.

    Raises:
        FileNotFoundError: the folder does not exist.
        ValueError: it is not a results folder (no ``results.csv`` / ``environment.json``, or a ``results.csv``
            lacking the schema's columns), or it carries an ``INCOMPLETE`` marker.
    """
    d = Path(results_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such results folder")
    if (d / INCOMPLETE_MARKER).exists() and not allow_incomplete:
        raise ValueError(f"{d} is marked {INCOMPLETE_MARKER}: the run did not finish")
    missing = [n for n in ("results.csv", "environment.json") if not (d / n).is_file()]
    if missing:
        raise ValueError(f"{d} is not a results folder: no {' or '.join(missing)}")
    try:
        df = pd.read_csv(d / "results.csv", keep_default_na=True)
        env = json.loads((d / "environment.json").read_text())
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{d} is not a readable results folder: {type(exc).__name__}: {exc}") from None
    lacking = [c for c in _REQUIRED if c not in df.columns]
    if lacking:
        raise ValueError(f"{d}/results.csv lacks the columns {lacking} (written by another tool or an older kit?)")
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
