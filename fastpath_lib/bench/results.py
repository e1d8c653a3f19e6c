"""Results folders: written atomically, never silently overwritten, read back with clear errors, found again.

This is the one module that reads results folders: :func:`load_results` reads one, :func:`latest_gpu_results` and
:func:`recorded_gpu_run` find the newest recorded GPU run (the rule for which folder counts is
:func:`~fastpath_lib.bench.schema.is_gpu_run_folder`), and the lessons call :func:`recorded_gpu_run` instead of
deciding for themselves what counts as evidence.

A folder holds ``results.csv`` (one row per case and provider, :data:`~fastpath_lib.bench.schema.CSV_COLUMNS`),
``environment.json`` and the analyses. While a run is in progress it lives in a hidden sibling
``.<name>.partial-<pid>`` containing an ``INCOMPLETE`` marker; only a finished run is renamed to its final name, so
Ctrl-C never leaves a folder that looks complete. The next run for the same folder finds a staging folder left by
an interrupted run: it removes it and says so, or, for an evidence run (which holds GPU measurements), keeps it and
says where it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

from fastpath_lib.bench.analysis import boundary_table, classify, coverage_line
from fastpath_lib.bench.plot import boundary_plot
from fastpath_lib.bench.schema import CSV_COLUMNS, INCOMPLETE_MARKER, folder_state, is_gpu_run_folder, matrix_rows
from fastpath_lib.runtime import ROOT

__all__ = ["INCOMPLETE_MARKER", "RESULTS_ROOT", "Recorded", "begin", "stale_staging", "write", "write_table",
           "finish", "unfinished_cases", "finish_interrupted", "load_results", "latest_gpu_results",
           "recorded_gpu_run", "record_arguments", "record_source"]

#: Where results folders live in a checkout of the kit (``results/<device>-<date>/``).
RESULTS_ROOT = ROOT / "results"
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


def finish(staging: Path, out_dir: str | Path, *, force: bool = False, missing: list[str] | None = None,
           interrupted: bool = False) -> Path:
    """Rename the staging folder to ``out_dir`` (replacing it only with ``force``), removing its marker, or, when
    ``missing`` lists something (an evidence run with a partial, skipped or failed step; a ``bench --op`` run
    ``interrupted`` by Ctrl-C or SIGTERM, its finished steps' files kept), keeping the marker with those lines in it:
    the folder stays marked partial, and its readers say what is missing."""
    out = Path(out_dir)
    if missing:
        head = ("interrupted (Ctrl-C / SIGTERM): the files of the steps that finished are here; what did not finish:"
                if interrupted else "partial: the run finished, but not everything in its plan did:")
        (staging / INCOMPLETE_MARKER).write_text(head + "\n" + "".join(f"- {m}\n" for m in missing))
    else:
        (staging / INCOMPLETE_MARKER).unlink(missing_ok=True)
    if out.exists():
        if not force:
            raise FileExistsError(f"{out} appeared during the run; results left in {staging}")
        shutil.rmtree(out)
    staging.rename(out)
    return out


MATRIX_STEP = "the matrix"


def unfinished_cases(folder: Path, cases: list[str], providers, *, after_error=()) -> list[str]:
    """What a matrix cut short left out, read off the ``results.csv`` its run writes after every case: the cases with
    no row, then each provider with cases lacking its rows (a provider of ``after_error`` is not asked of a case whose
    own route gave an error: such a case gets none). Empty when every case has every provider's row.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"case_id": ["a", "a", "b"], "provider": ["eager", "compiled", "eager"],
    ...               "status": ["ok"] * 3}).to_csv(d / "results.csv", index=False)
    >>> unfinished_cases(d, ["a", "b", "c"], ["eager", "compiled"])
    ['1 of 3 cases not run: c', '2 of 3 cases without their compiled rows: b, c']
    """
    try:
        df = pd.read_csv(folder / "results.csv")
    except (FileNotFoundError, pd.errors.EmptyDataError):
        df = pd.DataFrame(columns=["case_id", "provider", "status"])
    have = {c: set(g["provider"]) for c, g in df.groupby("case_id")}
    wrong = set(df[(df["status"] == "error") & df["provider"].isin(("dispatched", "triton"))]["case_id"])
    out = []
    none = [c for c in cases if c not in have]
    if none:
        out.append(f"{len(none)} of {len(cases)} cases not run: {', '.join(none)}")
    for p in providers:
        lack = [c for c in cases if p not in have.get(c, ()) and not (p in after_error and c in wrong)]
        if lack and lack != none:
            out.append(f"{len(lack)} of {len(cases)} cases without their {p} rows: {', '.join(lack)}")
    return out


def finish_interrupted(staging: Path, out_dir: str | Path, left: list[str], *, force: bool = False,
                       cases: list[str] = (), providers=(), after_error=()) -> tuple[Path, list[str]]:
    """Keep what an interrupted run (Ctrl-C, SIGTERM) finished: the staging folder renamed to ``out_dir`` with its
    ``INCOMPLETE`` marker naming each step in ``left`` (the steps not finished, in order); :data:`MATRIX_STEP` among
    them is named with the cases and rows it did not write (:func:`unfinished_cases`). Returns the folder and those
    lines."""
    missing = []
    for step in left:
        gaps = unfinished_cases(staging, list(cases), providers, after_error=after_error) if step == MATRIX_STEP \
            else []
        missing += [f"not finished: {step}: {g}" for g in gaps] or [f"not finished: {step}"]
    return finish(staging, out_dir, force=force, missing=missing, interrupted=True), missing


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
    if not allow_incomplete and folder_state(d)[0] == "unfinished":
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


def _result_folders(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return [p.parent for p in root.glob("*/environment.json") if not p.parent.name.startswith(".")]


def latest_gpu_results(root: str | Path = "results") -> Path | None:
    """The newest results folder under ``root`` that is a recorded GPU run (finished, a GPU measurement, not
    synthetic: :func:`~fastpath_lib.bench.schema.is_gpu_run_folder`), by its ``timestamp``.

    Args:
        root: where results folders live (``results/<device>-<date>/``).

    Returns:
        the folder, or ``None`` when no GPU measurement has been recorded.

    Note:
        CPU / interpreter runs are never returned, however recent.
    """
    best = None
    for folder in _result_folders(Path(root)):
        if is_gpu_run_folder(folder):
            env = json.loads((folder / "environment.json").read_text())
            key = (str(env.get("timestamp", "")), folder.name)
            if best is None or key > best[0]:
                best = (key, folder)
    return None if best is None else best[1]


@dataclasses.dataclass
class Recorded:
    """The newest recorded GPU run (``folder``, its classified results ``df`` and ``env``), or none.

    >>> rec = recorded_gpu_run("/nonexistent/results")
    >>> rec.found, rec.line().startswith("no GPU run is recorded")
    (False, True)
    """

    root: Path
    folder: Path | None = None
    df: pd.DataFrame | None = None
    env: dict = dataclasses.field(default_factory=dict)
    other_folders: int = 0
    #: what the run's manifest says is missing (a partial evidence run: :func:`~fastpath_lib.bench.schema.
    #: folder_state`); empty for a complete folder
    missing: list = dataclasses.field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.folder is not None

    def line(self) -> str:
        """One plain sentence: which GPU run the numbers come from, or that there is none."""
        others = (f" ({self.other_folders} other folder(s) there are not finished GPU measurements and are not read)"
                  if self.other_folders else "")
        if not self.found:
            return (f"no GPU run is recorded under {self.root.name}/{others}: no GPU number is shown. A run of "
                    f"`python -m fastpath_lib evidence --out results/<device>-<date>` on a GPU records one, and these "
                    f"cells read it once it is committed.")
        e = self.env
        commit = str(e.get("git_commit") or "?")[:12]
        gaps = (f"; a PARTIAL run, missing: {'; '.join(self.missing)}" if self.missing else "")
        return (f"newest GPU run: {self.root.name}/{self.folder.name} ({e.get('device_name')}, "
                f"{e.get('compute_capability')}, {e.get('timestamp')}, commit {commit}); "
                f"{coverage_line(self.df, e)}{gaps}{others}")


def recorded_gpu_run(root: str | Path = RESULTS_ROOT) -> Recorded:
    """The newest recorded GPU results folder under ``root``, loaded, or a :class:`Recorded` saying there is none.

    Args:
        root: the results folder root (default: the kit's ``results/``).

    Returns:
        a :class:`Recorded`; ``found`` is false when no folder holds a finished, non-synthetic GPU measurement.
    """
    rootp = Path(root)
    newest = latest_gpu_results(rootp)
    others = len([f for f in _result_folders(rootp) if f != newest and not is_gpu_run_folder(f)])
    if newest is None:
        return Recorded(root=rootp, other_folders=others)
    df, env = load_results(newest)
    return Recorded(root=rootp, folder=newest, df=df, env=env, other_folders=others, missing=folder_state(newest)[1])


def record_arguments(command: str, doc: str | None, what: str, default: str,
                     argv: list[str] | None) -> argparse.Namespace:
    """The arguments of a command that records a verdict read from a results folder into a per-architecture file
    (``python -m fastpath_lib threshold``, ``... capture``): ``RESULTS_DIR [--check] [--file PATH]``.

    Args:
        command: the command's name after ``python -m fastpath_lib``.
        doc: the command's description (its function's docstring).
        what: what ``--check`` prints (``"the threshold"``, ``"the verdict"``).
        default: the file written when ``--file`` is not given, as the help names it.
        argv: the command line (``None``: ``sys.argv``).
    """
    p = argparse.ArgumentParser(prog=f"python -m fastpath_lib {command}", description=doc)
    p.add_argument("results_dir")
    p.add_argument("--check", action="store_true", help=f"print {what}, write nothing")
    p.add_argument("--file", help=f"the {command} record (default: {default})")
    return p.parse_args(argv)


def record_source(results_dir: str | Path, root: str | Path | None = None) -> str:
    """How a per-architecture record names the results folder it came from: relative to ``root`` (default: the kit's
    checkout) when the folder is inside it, else its absolute path."""
    src, base = Path(results_dir).resolve(), Path(root).resolve() if root is not None else ROOT
    return str(src.relative_to(base)) if src.is_relative_to(base) else str(src)
