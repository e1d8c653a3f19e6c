"""What a result means, in one place: the columns of ``results.csv``, its time unit, the row families, the outcome
words, the measurement labels, the one rule for "is this a GPU measurement", and which results folder counts as a
recorded GPU run. Every other module imports these; none spells them again (``tests/bench/test_bench.py`` greps for
copies).

Every table the kit writes or prints gives a time's unit in its column's name (:data:`UNIT_SUFFIXES`): a call's time in
**microseconds** (:data:`TIME_UNIT`; ``median_us``, ``samples_us``, ...: ``results.csv``, the summary table, the PR
note, the host-overhead table and the exercises' synthetic tables), a compile time in **seconds** (``compile_s``,
and ``total_compile_s`` in the compile-cost table).

A results table holds two kinds of rows, told apart by ``family``: the predeclared matrix's cases (``bench/cases.json``)
and the host-overhead family (:data:`HOST_FAMILY`, per-call host time of the dispatch, :mod:`fastpath_lib.bench.host`).
Whether a row is a GPU measurement is decided once, when it is measured, and carried in its ``gpu_measurement`` column
and in ``environment.json``; :func:`is_gpu_measurement` reads both, and they must agree. A GPU *run* that counts as
evidence (:func:`counts_as_gpu_run`, :func:`is_gpu_run_folder`) is moreover not synthetic, and its folder finished.

Nothing here imports the rest of the kit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

__all__ = ["TIME_UNIT", "CSV_COLUMNS", "cpu_mode", "shape_text", "OWN_ROUTES", "TIME_COLUMNS", "HOST_FAMILY", "NOT_GPU",
           "NO_BANDWIDTH", "GPU_LABEL", "SYNTHETIC_LABEL",
           "WIN", "NEUTRAL", "LOSS", "FALLBACK", "UNMEASURED", "REFERENCE", "OUTCOMES", "TIMED_OUTCOMES",
           "AT_BASELINE", "OBSERVED", "INCOMPLETE_MARKER", "INCOMPLETE_STATUSES", "manifest_gaps", "folder_state",
           "matrix_rows", "host_rows", "is_gpu_measurement", "counts_as_gpu_run", "is_gpu_run_folder",
           "measurement_label", "empty_row"]

#: The one time unit of every table the kit prints.
TIME_UNIT = "us"

#: Columns of ``results.csv``, in order (one row per case and provider). ``bytes_moved`` is the bytes model;
#: ``counted_bytes`` ... ``oob_accesses`` are counted by Triton's interpreter on a CPU run (empty on a GPU run and for
#: calls that launch no Triton kernel; :mod:`fastpath_lib.bench.mechanism`).
CSV_COLUMNS = [
    "case_id", "family", "provider", "pass", "rows", "cols", "dtype", "layout", "pad", "offset", "declared_shape",
    "expected", "rationale", "route", "route_backward", "reasons", "status", "note", "warnings", "timer", "warmup",
    "reps", "number", "input_sets", "median_us", "q20_us", "q80_us", "mean_us", "min_us", "samples_us", "bytes_moved",
    "counted_bytes", "requested_bytes", "scratch_bytes", "oob_accesses", "gbps", "copy_gbps", "pct_copy_bw",
    "launches_per_call", "launches_note", "compile_s", "gpu_measurement", "quick", "device_name",
    "graph_median_us", "do_bench_median_us",
]

#: The unit of a column whose name ends so.
UNIT_SUFFIXES = {"_us": "microseconds", "_s": "seconds"}
#: Columns holding times (microseconds).
TIME_COLUMNS = ("median_us", "q20_us", "q80_us", "mean_us", "min_us")

#: ``family`` of the host-overhead rows (not predeclared matrix cases).
HOST_FAMILY = "host-overhead"

#: The label every timing that is not a GPU measurement carries.
#: The providers that run the op's own code (its public function and its fast route): a wrong result or an
#: unexplained memory access there is the op's error.
OWN_ROUTES = ("dispatched", "triton")


NOT_GPU = "not a GPU measurement"
#: A row's note where its timing is :data:`NOT_GPU`: its bandwidth columns are left empty, as the kit presents no CPU
#: timing as a GPU's performance.
NO_BANDWIDTH = (f"gbps and pct_copy_bw left empty: a CPU / Triton-interpreter timing ({NOT_GPU}) gives no GPU "
                "bandwidth")
#: The label of a GPU measurement.
GPU_LABEL = "GPU measurement"
#: The label of a constructed table (``environment["synthetic"]``): nothing in it was measured.
SYNTHETIC_LABEL = "SYNTHETIC data, not a measurement"

#: The outcome words. A timed comparison with the baseline gives one of :data:`TIMED_OUTCOMES`; a dispatched call
#: that took the fallback is :data:`FALLBACK`; a row that is not a GPU measurement (or lacks a baseline) is
#: :data:`UNMEASURED`; the baseline itself is :data:`REFERENCE`.
WIN, NEUTRAL, LOSS, FALLBACK, UNMEASURED, REFERENCE = "win", "neutral", "loss", "fallback", "unmeasured", "reference"
#: What a matrix case may be expected to do on a CUDA GPU (``bench/cases.json``'s ``expected``).
OUTCOMES = (WIN, NEUTRAL, LOSS, FALLBACK)
#: The outcomes of a timed comparison with the baseline.
TIMED_OUTCOMES = (WIN, NEUTRAL, LOSS)
#: The timed outcomes that keep the baseline's speed (a fallback at baseline; a threshold's "never loses").
AT_BASELINE = (WIN, NEUTRAL)
#: Every ``observed`` value a dispatched row can carry, in the order tables count them.
OBSERVED = (*OUTCOMES, UNMEASURED)

#: The marker file of a results folder still being written (or left by an interrupted run).
INCOMPLETE_MARKER = "INCOMPLETE"


def _truthy(v) -> bool | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, str):
        s = v.strip().lower()
        return True if s == "true" else False if s == "false" else None
    return bool(v)


def is_gpu_measurement(df: pd.DataFrame | None, env: dict | None = None) -> bool:
    """The one rule: a table is a GPU measurement when its environment says so and every row's carried flag agrees.

    Args:
        df: the results (``None``: the environment alone); a row whose ``gpu_measurement`` is unset does not vote.
        env: its ``environment.json`` (default: ``df.attrs["environment"]``); without one, the rows decide (at least
            one must carry the flag).

    >>> is_gpu_measurement(pd.DataFrame({"gpu_measurement": [True, "False"]}))
    False
    >>> is_gpu_measurement(pd.DataFrame({"gpu_measurement": [False]}), {"gpu_measurement": True})
    False
    """
    env = env if env is not None else (df.attrs.get("environment") if df is not None else None)
    votes = [] if df is None or "gpu_measurement" not in df.columns else \
        [f for f in map(_truthy, df["gpu_measurement"]) if f is not None]
    if env and "gpu_measurement" in env:
        return _truthy(env["gpu_measurement"]) is True and all(votes)
    return bool(votes) and all(votes)


def counts_as_gpu_run(env: dict | None, df: pd.DataFrame | None = None) -> bool:
    """A GPU run that counts as evidence: a GPU measurement (:func:`is_gpu_measurement`) that is not synthetic.

    >>> counts_as_gpu_run({"gpu_measurement": True, "synthetic": True})
    False
    """
    return bool(env) and not env.get("synthetic") and is_gpu_measurement(df, env)


#: An evidence step's statuses that leave its folder partial (every status but "ran").
INCOMPLETE_STATUSES = ("partial", "skipped", "failed")


def manifest_gaps(manifest: dict | None) -> list[str]:
    """What a finished evidence run's ``manifest.json`` says is missing: one line per step that did not run to the
    end (``partial``: its collected vs run; ``skipped``; ``failed``), with its why.

    >>> manifest_gaps({"steps": [{"name": "a", "status": "ran"}, {"name": "b", "status": "partial", "why": "cut",
    ...                                                              "details": {"collected": 9, "run": 4}}]})
    ['b: partial, ran 4 of 9 (cut)']
    """
    out = []
    for s in (manifest or {}).get("steps", []):
        st = s.get("status")
        if st == "ran":
            continue
        d = s.get("details") if isinstance(s.get("details"), dict) else {}
        counts = f", ran {d['run']} of {d['collected']}" if st == "partial" and "collected" in d else ""
        out.append(f"{s.get('name')}: {st}{counts}" + (f" ({s['why']})" if s.get("why") else ""))
    return out


def folder_state(folder: str | Path) -> tuple[str, list[str]]:
    """``(state, missing)`` of a results folder: ``"complete"`` (no :data:`INCOMPLETE_MARKER`), ``"partial"`` (an
    evidence run that finished with some step partial, skipped or failed: its marker stays, and ``missing`` lists
    :func:`manifest_gaps`) or ``"unfinished"`` (marked, and no finished manifest: the run was interrupted)."""
    folder = Path(folder)
    if not (folder / INCOMPLETE_MARKER).exists():
        return "complete", []
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return "unfinished", ["the run did not finish (no readable manifest.json)"]
    if not isinstance(manifest, dict) or not manifest.get("finished"):
        return "unfinished", ["the run did not finish (manifest.json has no finish time)"] + manifest_gaps(manifest)
    return "partial", manifest_gaps(manifest)


def is_gpu_run_folder(folder: str | Path) -> bool:
    """A results folder that is a recorded GPU run: finished (no :data:`INCOMPLETE_MARKER`, or a finished evidence run
    marked partial: :func:`folder_state`; its readers say what is missing), and its readable ``environment.json``
    with the rows of its ``results.csv`` :func:`counts_as_gpu_run`. CPU and interpreter runs never count, however
    recent."""
    folder = Path(folder)
    if folder.name.startswith(".") or folder_state(folder)[0] == "unfinished":
        return False
    try:
        env = json.loads((folder / "environment.json").read_text())
    except (OSError, ValueError):
        return False
    try:
        rows = pd.read_csv(folder / "results.csv", usecols=["gpu_measurement"])
    except (OSError, ValueError):  # no table, or one without the flag: the environment alone decides
        rows = None
    return isinstance(env, dict) and counts_as_gpu_run(env, rows)


def shape_text(rows, cols, declared=None) -> str:
    """``ROWSxCOLS`` with whole numbers (a table read back from CSV holds floats), or the declared shape where the row
    count is missing (a skipped row).

    >>> shape_text(8.0, 4096), shape_text(float("nan"), 4096, "Nx4096")
    ('8x4096', 'Nx4096')
    """
    try:
        return f"{int(rows)}x{int(cols)}"
    except (TypeError, ValueError):
        return str(declared) if isinstance(declared, str) and declared else f"?x{cols}"


def cpu_mode(env: dict | None) -> str:
    """What ran in a CPU run, from its environment record: the Triton route in Triton's interpreter, or (interpreter
    off) no kernel at all.

    >>> cpu_mode({"interpreter": True})
    'CPU / Triton interpreter'
    >>> cpu_mode({"interpreter": False})
    "CPU, Triton's interpreter off: no Triton kernel ran, every call took the fallback"
    """
    if (env or {}).get("interpreter"):
        return "CPU / Triton interpreter"
    return "CPU, Triton's interpreter off: no Triton kernel ran, every call took the fallback"


def measurement_label(env: dict | None, df: pd.DataFrame | None = None) -> str:
    """:data:`SYNTHETIC_LABEL`, :data:`GPU_LABEL` or :data:`NOT_GPU`: what a table's timings are.

    >>> measurement_label({"gpu_measurement": False})
    'not a GPU measurement'
    """
    if env and env.get("synthetic"):
        return SYNTHETIC_LABEL
    return GPU_LABEL if is_gpu_measurement(df, env or {}) else NOT_GPU


def matrix_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The predeclared matrix's rows (every family but :data:`HOST_FAMILY`)."""
    if "family" not in df.columns:
        return df
    return df[df["family"].astype(str) != HOST_FAMILY]


def host_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The host-overhead rows."""
    if "family" not in df.columns:
        return df.iloc[0:0]
    return df[df["family"].astype(str) == HOST_FAMILY]


def empty_row(**values) -> dict:
    """A results row with every :data:`CSV_COLUMNS` key (``None`` unless given)."""
    row = {c: None for c in CSV_COLUMNS}
    row["samples_us"] = "[]"
    row.update(values)
    return row
