"""What the numbers say: classification against the baseline, the dispatch boundary, the row threshold, drift.

Classification (:func:`classify`) uses a noise band taken from the run itself: for each provider row, the band is
the larger of the relative 20-80 % spreads, ``(q80 - q20) / median``, of the provider's and the baseline's samples.
A provider *wins* when its median time is below ``baseline * (1 - band)``, *loses* when above
``baseline * (1 + band)``, and is *neutral* in between. A dispatched call that took the fallback is *fallback*
whatever its time (``fallback_at_baseline`` says whether it kept the baseline's speed, i.e. was not a loss).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import torch

from fastpath_lib import runtime
from fastpath_lib.rmsnorm.predicate import DEFAULT_CUDA_MIN_ROWS, INTERPRETER_MIN_ROWS, MAX_COLS

__all__ = ["classify", "noise_band", "outcome", "summary_table", "boundary_table", "boundary_plot", "threshold_sweep",
           "compare"]


def noise_band(q20: float, median: float, q80: float, base_q20: float, base_median: float, base_q80: float) -> float:
    """The relative noise band for one comparison: the larger 20-80 % spread of the two sample sets.

    >>> noise_band(9, 10, 11, 18, 20, 21)
    0.2
    """
    spreads = [(hi - lo) / med for lo, med, hi in ((q20, median, q80), (base_q20, base_median, base_q80))
               if med and not any(map(_isnan, (lo, med, hi)))]
    return max(spreads) if spreads else math.nan


def outcome(ratio: float, band: float) -> str:
    """``"win"`` / ``"loss"`` / ``"neutral"`` for a time ratio (candidate / baseline) and a relative noise band.

    >>> outcome(0.8, 0.1), outcome(1.05, 0.1), outcome(1.3, 0.1)
    ('win', 'neutral', 'loss')
    """
    return "win" if ratio < 1 - band else "loss" if ratio > 1 + band else "neutral"


def _isnan(v) -> bool:
    try:
        return v is None or math.isnan(float(v))
    except (TypeError, ValueError):
        return True


def classify(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``speedup``, ``noise_band``, ``vs_baseline``, ``observed``, ``fallback_at_baseline`` and ``matches``.

    Args:
        df: results with ``case_id``, ``provider``, ``status``, ``median_ms``, ``q20_ms``, ``q80_ms`` and ``route``.

    Returns:
        a copy. ``vs_baseline`` is win/neutral/loss (``reference`` for the baseline, the status for skipped or failed
        rows, ``unmeasured`` without a baseline); ``observed`` equals it except that a dispatched row whose route was
        the fallback is ``fallback``; ``matches`` (dispatched rows) says whether ``observed == expected``.

    Note:
        Pure arithmetic on the table: works the same for CPU and GPU data; whether the timings are a GPU measurement
        is recorded in ``gpu_measurement`` and decided by the caller.
    """
    out = df.copy()
    for c in ("speedup", "noise_band"):
        out[c] = math.nan
    out["vs_baseline"] = None
    out["observed"] = None
    out["fallback_at_baseline"] = None
    out["matches"] = None
    base = {r.case_id: r for r in out.itertuples() if r.provider == "baseline" and r.status == "ok"}
    for i, r in zip(out.index, out.itertuples()):
        if r.status != "ok":
            vs = str(r.status)
        elif r.provider == "baseline":
            vs = "reference"
        elif r.case_id not in base:
            vs = "unmeasured"
        else:
            b = base[r.case_id]
            band = noise_band(r.q20_ms, r.median_ms, r.q80_ms, b.q20_ms, b.median_ms, b.q80_ms)
            ratio = r.median_ms / b.median_ms
            out.at[i, "speedup"] = b.median_ms / r.median_ms
            out.at[i, "noise_band"] = band
            vs = outcome(ratio, band)
        obs = vs
        if r.provider == "dispatched" and str(r.route) == "fallback":
            obs = "fallback"
            out.at[i, "fallback_at_baseline"] = vs in ("win", "neutral")
        out.at[i, "vs_baseline"] = vs
        out.at[i, "observed"] = obs
        if r.provider == "dispatched":
            out.at[i, "matches"] = obs == r.expected
    return out


def _gpu(df: pd.DataFrame, env: dict | None) -> bool:
    if env is not None and "gpu_measurement" in env:
        return bool(env["gpu_measurement"])
    env = df.attrs.get("environment") or {}
    if "gpu_measurement" in env:
        return bool(env["gpu_measurement"])
    return bool(df["gpu_measurement"].astype(str).str.lower().eq("true").all()) if len(df) else False


def summary_table(df: pd.DataFrame, *, gpu: bool | None = None) -> pd.DataFrame:
    """One row per case: expected vs observed, route, and the providers' median times.

    Args:
        df: classified results (:func:`classify` is applied if needed).
        gpu: whether these are GPU measurements (default: from the data). When false the ``speedup`` column is
            left out: interpreter/CPU ratios are not a performance result.

    Returns:
        a DataFrame indexed by case id.
    """
    if "observed" not in df.columns:
        df = classify(df)
    gpu = _gpu(df, None) if gpu is None else gpu
    rows = []
    for cid, g in df.groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        d = by.get("dispatched") or next(iter(by.values()))
        row = {"case": cid, "pass": g["pass"].iloc[0],
               "shape": f"{d.rows}x{d.cols}", "dtype": d.dtype, "layout": d.layout + (f"+{d.pad}" if d.pad else "")
               + (f" off{d.offset}" if d.offset else ""), "expected": d.expected, "route": d.route,
               "observed": d.observed if "dispatched" in by else "unmeasured"}
        for p in ("baseline", "dispatched", "triton", "compiled"):
            r = by.get(p)
            row[f"{p}_ms"] = r.median_ms if r is not None and r.status == "ok" else math.nan
        if gpu:
            row["speedup"] = by["dispatched"].speedup if "dispatched" in by else math.nan
            row["noise_band"] = by["dispatched"].noise_band if "dispatched" in by else math.nan
        row["matches"] = d.matches if "dispatched" in by else None
        rows.append(row)
    return pd.DataFrame(rows).set_index("case")


def boundary_table(df: pd.DataFrame) -> pd.DataFrame:
    """The dispatch boundary as a table: per case, rows, cols, route, and the time ratios against the baseline.

    Returns:
        columns ``case_id, rows, cols, dtype, layout, route, in_region, speedup_dispatched, speedup_triton,
        vs_baseline``, sorted by cols then rows.
    """
    if "observed" not in df.columns:
        df = classify(df)
    out = []
    for cid, g in df.groupby("case_id", sort=False):
        by = {r.provider: r for r in g.itertuples()}
        d = by.get("dispatched")
        if d is None:
            continue
        t = by.get("triton")
        out.append({"case_id": cid, "rows": d.rows, "cols": d.cols, "dtype": d.dtype, "layout": d.layout,
                    "route": d.route, "in_region": d.route == "triton", "speedup_dispatched": d.speedup,
                    "speedup_triton": t.speedup if t is not None else math.nan, "vs_baseline": d.vs_baseline})
    return pd.DataFrame(out).sort_values(["cols", "rows"], kind="stable").reset_index(drop=True)


def boundary_plot(df: pd.DataFrame, ax=None, *, env: dict | None = None):
    """Speed-up over the baseline across row count and row width, with the eligibility region drawn.

    Args:
        df: results (classified or not).
        ax: a matplotlib Axes to draw into (default: a new Figure, no pyplot state, so it works headless).
        env: the environment dict (decides the title label and which row threshold to draw).

    Returns:
        the matplotlib ``Figure``.

    Note:
        For CPU/interpreter data the title says "not a GPU measurement" and the colour is the interpreter's time
        ratio, which says nothing about GPU speed.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    table = boundary_table(df)
    gpu = _gpu(df, env)
    if ax is None:
        fig = Figure(figsize=(8, 5.5))
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure
    interp = (env or df.attrs.get("environment") or {}).get("interpreter", not gpu)
    min_rows = INTERPRETER_MIN_ROWS if interp or not gpu else DEFAULT_CUDA_MIN_ROWS
    rows_max = max([*table["rows"].tolist(), min_rows * 4]) * 2 if len(table) else 1 << 16
    cols_max = max([*table["cols"].tolist(), MAX_COLS]) * 2 if len(table) else 1 << 16
    ax.add_patch(Rectangle((min_rows, 1), rows_max - min_rows, MAX_COLS - 1, facecolor="tab:green", alpha=0.08,
                           edgecolor="tab:green", linestyle="--",
                           label=f"eligible: rows >= {min_rows}, cols <= {MAX_COLS} (+ dtype/stride/alignment)"))
    import numpy as np

    sp = table["speedup_dispatched"].astype(float).to_numpy()
    logs = np.log2(np.where(np.isfinite(sp) & (sp > 0), sp, 1.0))
    lim = max(1.0, float(np.nanmax(np.abs(logs))) if len(logs) else 1.0)
    for route, marker in (("triton", "o"), ("fallback", "X")):
        m = (table["route"] == route).to_numpy()
        if m.any():
            sc = ax.scatter(table["rows"][m], table["cols"][m], c=logs[m], cmap="coolwarm_r", vmin=-lim, vmax=lim,
                            marker=marker, s=90, edgecolors="black", label=f"route: {route}")
    for r in table.itertuples():
        ax.annotate(r.case_id, (r.rows, r.cols), fontsize=6, xytext=(4, 4), textcoords="offset points")
    if len(table):
        cb = fig.colorbar(sc, ax=ax)
        cb.set_label("log2(baseline time / dispatched time)" + ("" if gpu else "  [interpreter, not GPU]"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlim(0.5, rows_max)
    ax.set_ylim(16, cols_max)
    ax.set_xlabel("rows")
    ax.set_ylabel("row width (cols)")
    label = "GPU measurement" if gpu else "CPU / Triton interpreter -- not a GPU measurement"
    if (env or df.attrs.get("environment") or {}).get("synthetic"):
        label = "SYNTHETIC data -- not a measurement"
    ax.set_title(f"Dispatch boundary: speed-up of rms_norm over F.rms_norm\n({label})", fontsize=10)
    ax.legend(loc="lower left", fontsize=7)
    return fig


def threshold_sweep(rows=None, cols=None, dtype: torch.dtype = torch.float16, *, quick: bool = False,
                    settings: dict | None = None) -> pd.DataFrame:
    """Time the Triton forward kernel against ``F.rms_norm`` across row counts to find the crossover.

    Args:
        rows: row counts (default: powers of two, 1..16384 on CUDA; 8..64 off CUDA).
        cols: row widths (default: 2048, 4096, 8192 on CUDA; 256 off CUDA).
        dtype: input dtype.
        quick: fewer points and shorter budgets.
        settings: harness settings (default: this machine's).

    Returns:
        one row per (cols, rows, provider) with median/quantiles and ``vs_baseline``; ``attrs["proposal"]`` is a
        dict: per width the smallest row count from which Triton never loses, and the proposed
        ``CUDA_MIN_ROWS[(major, minor)]`` (the largest of those), or ``None`` with a reason off-GPU.

    Note:
        Off CUDA the kernel runs in the interpreter: the sweep exercises the pipeline but proposes no threshold.
    """
    from fastpath_lib.bench import harness
    from fastpath_lib.cases import CaseSpec
    from fastpath_lib.rmsnorm import kernels
    from fastpath_lib.rmsnorm.predicate import default_eps

    cuda = runtime.cuda_available()
    gpu = cuda and not runtime.interpreter_enabled()
    if rows is None:
        rows = [2 ** k for k in range(0, 15, 2 if quick else 1)] if gpu else ([8, 16, 32] if quick else [8, 16, 32, 64])
    if cols is None:
        cols = ((4096,) if quick else (2048, 4096, 8192)) if gpu else (256,)
    settings = settings or harness.settings_for(quick)
    dev = "cuda" if cuda else "cpu"
    eps = default_eps(dtype)
    records = []
    for c in cols:
        for r in rows:
            sets = [CaseSpec(rows=r, cols=c, dtype=dtype).build(seed=s, device=dev).args()
                    for s in range(settings["input_sets"])]
            it = iter(range(10 ** 12))

            def nxt():
                return sets[next(it) % len(sets)]

            fns = {"baseline": lambda: F_rms(nxt()), "triton": lambda: _kernel_fwd(kernels, nxt(), eps)}
            for p, fn in fns.items():
                with torch.no_grad():
                    res = harness.time_callable(fn, settings)
                s = res["samples_ms"]
                q = torch.tensor(s, dtype=torch.float64).quantile(torch.tensor([0.2, 0.5, 0.8], dtype=torch.float64))
                records.append({"cols": c, "rows": r, "dtype": str(dtype).replace("torch.", ""), "provider": p,
                                "case_id": f"sweep_{r}x{c}", "status": "ok", "route": "n/a", "expected": "n/a",
                                "q20_ms": float(q[0]), "median_ms": float(q[1]), "q80_ms": float(q[2]),
                                "samples_ms": json.dumps([round(v, 6) for v in s]), "timer": res["timer"],
                                "gpu_measurement": gpu})
    df = classify(pd.DataFrame(records))
    per_width = {}
    for c in cols:
        t = df[(df.cols == c) & (df.provider == "triton")].sort_values("rows")
        ok = t["vs_baseline"].isin(["win", "neutral"]).tolist()
        rs = t["rows"].tolist()
        cross = None
        for k in range(len(rs)):
            if all(ok[k:]):
                cross = int(rs[k])
                break
        per_width[int(c)] = cross
    if gpu:
        cap = torch.cuda.get_device_capability()
        vals = [v for v in per_width.values() if v is not None]
        proposal = {"capability": f"sm_{cap[0]}{cap[1]}", "per_width_crossover_rows": per_width,
                    "proposed_min_rows": max(vals) if len(vals) == len(per_width) else None,
                    "line": (f"CUDA_MIN_ROWS[({cap[0]}, {cap[1]})] = {max(vals)}"
                             if vals and len(vals) == len(per_width) else None),
                    "reason": "smallest swept row count from which the kernel never loses to F.rms_norm, largest "
                              "over the swept widths" if vals else "the kernel loses at the largest swept row count"}
    else:
        proposal = {"capability": None, "per_width_crossover_rows": per_width, "proposed_min_rows": None, "line": None,
                    "reason": "not a GPU measurement (CPU / Triton interpreter): no threshold can be proposed"}
    df.attrs["proposal"] = proposal
    return df


def _kernel_fwd(kernels, args, eps):
    x, _, w = args
    return kernels.forward(x, w, eps)


def F_rms(args):
    """``F.rms_norm(x, normalized_shape, weight)`` under ``no_grad`` for an ``args()`` triple."""
    x, ns, w = args
    with torch.no_grad():
        return torch.nn.functional.rms_norm(x, ns, w)


def compare(old_dir: str | Path, new_dir: str | Path) -> pd.DataFrame:
    """Per-case, per-provider drift between two results folders, flagging changed classifications.

    Args:
        old_dir, new_dir: results folders.

    Returns:
        columns ``case_id, provider, old_ms, new_ms, drift_pct, old_observed, new_observed, changed,
        old_band, new_band``; ``attrs`` carry ``environment_differences`` (device, versions, commit), ``only_old`` and
        ``only_new`` case ids.

    Note:
        Comparing a CPU run with a GPU run is allowed but flagged in ``environment_differences``.
    """
    from fastpath_lib.bench.results import load_results

    old, eo = load_results(old_dir)
    new, en = load_results(new_dir)
    m = old.merge(new, on=["case_id", "provider"], how="outer", suffixes=("_old", "_new"), indicator=True)
    out = pd.DataFrame({
        "case_id": m["case_id"], "provider": m["provider"], "old_ms": m["median_ms_old"], "new_ms": m["median_ms_new"],
        "old_observed": m["observed_old"], "new_observed": m["observed_new"], "old_band": m["noise_band_old"],
        "new_band": m["noise_band_new"]})
    out["drift_pct"] = 100 * (out["new_ms"] / out["old_ms"] - 1)
    out["changed"] = (out["old_observed"].astype(str) != out["new_observed"].astype(str)) & (m["_merge"] == "both")
    out = out[["case_id", "provider", "old_ms", "new_ms", "drift_pct", "old_observed", "new_observed", "changed",
               "old_band", "new_band"]]
    keys = ("device_name", "compute_capability", "gpu_measurement", "torch", "triton", "cuda_version", "git_commit",
            "interpreter")
    out.attrs["environment_differences"] = {k: (eo.get(k), en.get(k)) for k in keys if eo.get(k) != en.get(k)}
    out.attrs["only_old"] = sorted(set(m.loc[m["_merge"] == "left_only", "case_id"]))
    out.attrs["only_new"] = sorted(set(m.loc[m["_merge"] == "right_only", "case_id"]))
    return out
