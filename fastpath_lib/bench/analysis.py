"""What the numbers say: classification against the baseline, the summary table and the dispatch boundary table.

Pure table arithmetic, the same for CPU and GPU data; nothing is timed here.

Classification (:func:`classify`) uses a noise band taken from the run itself: for each provider row, the band is
the larger of the relative 20-80 % spreads, ``(q80 - q20) / median``, of the provider's and the baseline's samples.
A provider *wins* when its median time is below ``baseline * (1 - band)``, *loses* when above
``baseline * (1 + band)``, and is *neutral* in between (:func:`outcome`, the kit's one rule; it and
:func:`noise_band` live in :mod:`fastpath_lib.bench.outcome` and are re-exported here). A dispatched call that
took the fallback is *fallback* whatever its time (``fallback_at_baseline`` says whether it kept the baseline's speed).
A row whose timing is not a GPU measurement (its carried ``gpu_measurement`` flag is false) is *unmeasured*: no
win, loss or speed-up is read from it. The host-overhead family measures host time, which a CPU measures for real,
so its rows are classified on any machine. A GPU time that implies more bandwidth than the copy measured in the same
run (``bytes_moved`` over ``median_us`` above ``copy_gbps``: :func:`over_copy_bandwidth`) is a broken measurement,
never a win: the row is flagged ``broken_measurement`` and read unmeasured, and so is every comparison with a broken
baseline.
"""

from __future__ import annotations

import math

import pandas as pd

from fastpath_lib.bench.schema import (
    AT_BASELINE,
    FALLBACK,
    HOST_FAMILY,
    OBSERVED,
    OWN_ROUTES,
    REFERENCE,
    TIMED_OUTCOMES,
    UNMEASURED,
    is_gpu_measurement,
    matrix_rows,
    shape_text,
)
from fastpath_lib.bench.outcome import isnan as _isnan
from fastpath_lib.bench.outcome import noise_band, outcome  # the rule alone, for what hands out only it

__all__ = ["noise_band", "outcome", "classify", "summary_table", "boundary_table", "outcome_counts",
           "coverage_line", "over_copy_bandwidth", "wrong_cases", "baseline_errors"]


def _measured(row) -> bool:
    """A row's timing can be classified: a GPU measurement, a host-overhead row, or synthetic data without a flag."""
    if str(getattr(row, "family", "")) == HOST_FAMILY:
        return True
    flag = getattr(row, "gpu_measurement", None)
    return not (flag is False or str(flag).strip().lower() == "false")


def over_copy_bandwidth(row) -> bool:
    """Whether a timed row implies more than the copy bandwidth measured in its run: ``bytes_moved / median_us``
    above ``copy_gbps`` (``False`` where either is missing). No kernel moves its bytes faster than a copy does, so such
    a time is a broken measurement (an async launch timed without a sync, a cached result, a wrong bytes model).

    >>> over_copy_bandwidth(pd.Series({"bytes_moved": 2e9, "median_us": 1000.0, "copy_gbps": 1500.0}))
    True
    >>> over_copy_bandwidth(pd.Series({"bytes_moved": 1e9, "median_us": 1000.0, "copy_gbps": 1500.0}))
    False
    """
    nbytes, us, copy = (getattr(row, k, None) for k in ("bytes_moved", "median_us", "copy_gbps"))
    if any(_isnan(v) for v in (nbytes, us, copy)) or float(us) <= 0 or float(copy) <= 0:
        return False
    return float(nbytes) / (float(us) * 1e-6) / 1e9 > float(copy)


def classify(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``speedup``, ``noise_band``, ``vs_baseline``, ``observed``, ``fallback_at_baseline``, ``matches`` and
    ``broken_measurement``.

    Args:
        df: results with ``case_id``, ``provider``, ``status``, ``median_us``, ``q20_us``, ``q80_us``, ``route`` and
            the carried ``gpu_measurement`` flag.

    Returns:
        a copy. ``vs_baseline`` is win/neutral/loss (``reference`` for the baseline, the status for skipped or failed
        rows, ``unmeasured`` for rows that are not a GPU measurement, lack a baseline, or whose own or baseline's
        GPU time implies more than the copy bandwidth: ``broken_measurement``); ``observed`` equals it except
        that a dispatched row whose route was the fallback is ``fallback``; ``matches`` (dispatched rows) says whether
        ``observed == expected`` (``None`` when unmeasured).
    """
    out = df.copy()
    for c in ("speedup", "noise_band"):
        out[c] = math.nan
    for c in ("vs_baseline", "observed", "fallback_at_baseline", "matches"):
        out[c] = None
    out["broken_measurement"] = [r.status == "ok" and str(getattr(r, "family", "")) != HOST_FAMILY and _measured(r)
                                 and over_copy_bandwidth(r) for r in out.itertuples()]
    base = {r.case_id: r for r in out.itertuples() if r.provider == "baseline" and r.status == "ok"}
    for i, r in zip(out.index, out.itertuples()):
        measured = _measured(r)
        if r.status != "ok":
            vs = str(r.status)
        elif r.provider == "baseline":
            vs = REFERENCE
        elif r.case_id not in base or not measured or r.broken_measurement or base[r.case_id].broken_measurement:
            vs = UNMEASURED
        else:
            b = base[r.case_id]
            band = noise_band(r.q20_us, r.median_us, r.q80_us, b.q20_us, b.median_us, b.q80_us)
            out.at[i, "speedup"] = b.median_us / r.median_us
            out.at[i, "noise_band"] = band
            vs = outcome(r.median_us / b.median_us, band)
        obs = vs
        if r.provider == "dispatched" and str(r.route) == "fallback":
            obs = FALLBACK
            out.at[i, "fallback_at_baseline"] = vs in AT_BASELINE if vs in TIMED_OUTCOMES else None
        out.at[i, "vs_baseline"] = vs
        out.at[i, "observed"] = obs
        if r.provider == "dispatched":
            out.at[i, "matches"] = None if obs == UNMEASURED else obs == r.expected
    return out


def outcome_counts(df: pd.DataFrame) -> dict[str, int]:
    """How many matrix cases the dispatched op won, held, lost, left to the fallback, or left unmeasured.

    >>> outcome_counts(pd.DataFrame(columns=["provider", "observed"]))
    {'win': 0, 'neutral': 0, 'loss': 0, 'fallback': 0, 'unmeasured': 0}
    """
    disp = matrix_rows(df)
    disp = disp[disp["provider"] == "dispatched"]
    counts = disp["observed"].value_counts().to_dict() if len(disp) else {}
    return {k: int(counts.get(k, 0)) for k in OBSERVED}


def wrong_cases(df) -> dict[str, str]:
    """case id -> why, for the matrix cases whose own routes (:data:`OWN_ROUTES`) gave an error: a result that
    differs from the reference, or an interpreter count with out-of-bounds accesses or unexplained bytes."""
    m = matrix_rows(df)
    if not len(m) or "status" not in m.columns:
        return {}
    bad = m[m["provider"].isin(OWN_ROUTES) & (m["status"].astype(str) == "error")]
    return {str(r.case_id): f"{r.provider}: {r.note}" for r in bad.drop_duplicates("case_id").itertuples()}


def baseline_errors(df) -> list[str]:
    """``"CASE: PROVIDER: why"`` for each matrix row of a baseline (a provider outside :data:`OWN_ROUTES`) that gave
    an error: one that differs from the reference (:func:`fastpath_lib.bench.opbench.baseline_differs`, not timed) or
    one that raised."""
    m = matrix_rows(df)
    if not len(m) or "status" not in m.columns:
        return []
    bad = m[~m["provider"].isin(OWN_ROUTES) & (m["status"].astype(str) == "error")]
    return [f"{r.case_id}: {r.provider}: {r.note}" for r in bad.itertuples()]


def coverage_line(df: pd.DataFrame, env: dict | None = None) -> str:
    """``"N of M predeclared cases run"``, naming the cases that were not run (from ``env["declared_cases"]``).

    >>> coverage_line(pd.DataFrame({"case_id": ["a"], "family": ["x"]}), {"declared_cases": ["a", "b"]})
    '1 of 2 predeclared cases run (not run: b)'
    """
    env = env if env is not None else (df.attrs.get("environment") or {})
    m = matrix_rows(df)
    if len(m) and "status" in m.columns:
        m = m[m["status"].astype(str) != "not run"]  # rows the time budget never reached
    ran = list(dict.fromkeys(m["case_id"].astype(str))) if len(m) else []
    declared = list(env.get("declared_cases") or ran)
    missing = [c for c in declared if c not in ran]
    line = f"{sum(c in ran for c in declared)} of {len(declared)} predeclared cases run"
    return line + (f" (not run: {', '.join(missing)})" if missing else "")


def _shape(r) -> str:
    return shape_text(r.rows, r.cols)


def _declared(r) -> str:
    d = getattr(r, "declared_shape", None)
    return _shape(r) if d is None or (isinstance(d, float) and math.isnan(d)) else str(d)


def summary_table(df: pd.DataFrame, *, gpu: bool | None = None) -> pd.DataFrame:
    """One row per matrix case: expected vs observed, route, the shape run beside the declared one, median times.

    Args:
        df: classified results (:func:`classify` is applied if needed); host-overhead rows are left out.
        gpu: whether these are GPU measurements (default: from the data). When false the ``speedup`` column is
            left out: CPU / interpreter ratios are not a performance result.

    Returns:
        a DataFrame indexed by case id; times in microseconds.
    """
    if "observed" not in df.columns:
        df = classify(df)
    gpu = is_gpu_measurement(df) if gpu is None else gpu
    rows = []
    for cid, g in matrix_rows(df).groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        d = by.get("dispatched") or next(iter(by.values()))
        row = {"case": cid, "pass": g["pass"].iloc[0], "shape": _shape(d), "declared": _declared(d), "dtype": d.dtype,
               "layout": d.layout + (f"+{d.pad}" if d.pad else "") + (f" off{d.offset}" if d.offset else ""),
               "expected": d.expected, "route": d.route,
               "observed": d.observed if "dispatched" in by else UNMEASURED}
        for p in ("baseline", "dispatched", "triton", "compiled"):
            r = by.get(p)
            row[f"{p}_us"] = r.median_us if r is not None and r.status == "ok" else math.nan
        if gpu:
            row["speedup"] = by["dispatched"].speedup if "dispatched" in by else math.nan
            row["noise_band"] = by["dispatched"].noise_band if "dispatched" in by else math.nan
        row["matches"] = d.matches if "dispatched" in by else None
        rows.append(row)
    cols = (["case", "pass", "shape", "declared", "dtype", "layout", "expected", "route", "observed", "baseline_us",
             "dispatched_us", "triton_us", "compiled_us"] + (["speedup", "noise_band"] if gpu else []) + ["matches"])
    return pd.DataFrame(rows, columns=cols).set_index("case")


def _whole(n):
    """A row or column count as a whole number (a column that holds a missing count holds floats), NaN kept."""
    return int(n) if isinstance(n, (int, float)) and math.isfinite(n) else n


def boundary_table(df: pd.DataFrame) -> pd.DataFrame:
    """The dispatch boundary as a table: per matrix case, rows, cols, route, and the time ratios to the baseline.

    Returns:
        columns ``case_id, rows, cols, dtype, layout, route, in_region, speedup_dispatched, speedup_triton,
        vs_baseline``, sorted by cols then rows (ratios are NaN where the rows are not a GPU measurement).
    """
    if "observed" not in df.columns:
        df = classify(df)
    out = []
    for cid, g in matrix_rows(df).groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        d = by.get("dispatched")
        if d is None:
            continue
        t = by.get("triton")
        out.append({"case_id": cid, "rows": _whole(d.rows), "cols": _whole(d.cols), "dtype": d.dtype,
                    "layout": d.layout, "route": d.route, "in_region": d.route == "triton",
                    "speedup_dispatched": d.speedup, "speedup_triton": t.speedup if t is not None else math.nan,
                    "vs_baseline": d.vs_baseline})
    cols = ["case_id", "rows", "cols", "dtype", "layout", "route", "in_region", "speedup_dispatched",
            "speedup_triton", "vs_baseline"]
    return pd.DataFrame(out, columns=cols).sort_values(["cols", "rows"], kind="stable").reset_index(drop=True)
