"""The results schema, in one place: the columns of ``results.csv``, its time unit, and the row families.

Every table the kit writes or prints times in **microseconds** (:data:`TIME_UNIT`): ``results.csv`` (``median_us``,
``samples_us``, ...), the summary table, the PR note, the host-overhead table and the exercises' synthetic tables.

A results table holds two kinds of rows, told apart by ``family``: the predeclared matrix's cases (``bench/cases.json``)
and the host-overhead family (:data:`HOST_FAMILY`, per-call host time of the dispatch, :mod:`fastpath_lib.bench.host`).
Whether a row is a GPU measurement is decided once, when it is measured, and carried in its ``gpu_measurement`` column.

Nothing here imports the rest of the kit.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["TIME_UNIT", "CSV_COLUMNS", "TIME_COLUMNS", "HOST_FAMILY", "NOT_GPU", "matrix_rows", "host_rows",
           "is_gpu_measurement", "empty_row"]

#: The one time unit of every table the kit prints.
TIME_UNIT = "us"

#: Columns of ``results.csv``, in order (one row per case and provider).
CSV_COLUMNS = [
    "case_id", "family", "provider", "pass", "rows", "cols", "dtype", "layout", "pad", "offset", "declared_shape",
    "expected", "rationale", "route", "route_backward", "reasons", "status", "note", "warnings", "timer", "warmup",
    "reps", "number", "input_sets", "median_us", "q20_us", "q80_us", "mean_us", "min_us", "samples_us", "bytes_moved",
    "gbps", "copy_gbps", "pct_copy_bw", "launches_per_call", "launches_note", "compile_s", "gpu_measurement", "quick",
]

#: Columns holding times (microseconds).
TIME_COLUMNS = ("median_us", "q20_us", "q80_us", "mean_us", "min_us")

#: ``family`` of the host-overhead rows (not predeclared matrix cases).
HOST_FAMILY = "host-overhead"

#: The label every timing that is not a GPU measurement carries.
NOT_GPU = "not a GPU measurement"


def _truthy(v) -> bool | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, str):
        s = v.strip().lower()
        return True if s == "true" else False if s == "false" else None
    return bool(v)


def is_gpu_measurement(df: pd.DataFrame, env: dict | None = None) -> bool:
    """Whether a results table is a GPU measurement: the environment's flag, else every row's carried flag.

    >>> is_gpu_measurement(pd.DataFrame({"gpu_measurement": [True, "False"]}))
    False
    """
    for e in (env, df.attrs.get("environment")):
        if e and "gpu_measurement" in e:
            return bool(e["gpu_measurement"])
    if "gpu_measurement" not in df.columns or not len(df):
        return False
    return all(_truthy(v) is True for v in df["gpu_measurement"])


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
